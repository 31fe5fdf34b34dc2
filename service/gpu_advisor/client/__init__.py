"""The command line's client side: reading SPEC files, running a request in process or
against a running service, and the pass/fail rule of each command."""
