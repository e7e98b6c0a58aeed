"""``python -m textaudit`` runs the ``audit`` command line."""

from textaudit.cli.main import main

if __name__ == "__main__":
    main()
