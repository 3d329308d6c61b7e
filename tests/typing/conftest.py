"""tests/typing/user_script.py is checked by mypy (tests/test_typing.py), not run by pytest."""

collect_ignore = ["user_script.py"]
