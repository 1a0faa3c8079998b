import sys


class UserError(Exception):
    """Bad input from the user (file, spec, flag): the CLI prints the message on one line and exits 2."""


def run_main(fn, prog="mtplite"):
    """Call fn() the way every entry point (the CLI, scripts/*.py) should end: a UserError is one line naming the
    problem and its fix, exit 2, no traceback; Ctrl-C exits 130."""
    try:
        return fn() or 0
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # piped into `head` or a pager that closed early: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
