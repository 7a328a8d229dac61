"""`python -m agent_journal` runs the same entry point as the console script."""

from agent_journal.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
