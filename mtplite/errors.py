class UserError(Exception):
    """Bad input from the user (file, spec, flag): the CLI prints the message on one line and exits 2."""
