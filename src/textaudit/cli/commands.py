"""Commands that live outside ``main.py`` register themselves on the app when imported."""
