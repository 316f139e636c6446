"""Tool selection (SPEC §3 step 5): a pipeline of named steps over one shared state.

A plugin's step needs ``toolwire.selection.state`` (the state it reads and changes, the protocol
it follows, the failure it may raise) and ``toolwire.selection.trace`` (the record it writes).
"""
