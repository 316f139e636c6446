"""toolwire-pydocs: Python questions answered from the documentation the interpreter ships.

The corpus is text no one in this project wrote: the language reference topics of
``pydoc_data.topics`` (what ``help("for")`` shows) and the docstrings of a curated list of
standard-library modules, split into pages and indexed once per interpreter version.
"""

__version__ = "0.1.0"
