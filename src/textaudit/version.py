"""The package version, in one place (the root package, the results headers and the citation read it)."""

__version__ = "0.1.0"
