"""The two ways a case can be refused (both exit code 2 from a command line; a worker answers them
differently, see attncheck.worker)."""


class BadInput(Exception):
    """A case or golden this package cannot read: its message names what is wrong and what is valid.
    A worker answers "error" (the case file is broken, not the implementation)."""


class Unsupported(BadInput):
    """A valid case the implementation cannot express (a softcap it lacks, a mask convention it does
    not have, ...): a worker answers "unsupported REASON", and attncheck tallies the reasons."""
