"""toolwire-pharma: medicine interaction questions, built the way an outside plugin author would.

The data set bundled here is illustrative only: a handful of products and well-known interactions
to demonstrate the tools, not a source of medical advice.
"""

__version__ = "0.1.0"
