"""``python -m fairsets``: the same as the ``fairsets`` command."""

from fairsets.cli import main

main()
