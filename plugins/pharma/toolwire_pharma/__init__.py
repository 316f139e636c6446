"""toolwire-pharma: medicine interaction questions, built the way an outside plugin author would.

The data set bundled here is illustrative only: a handful of products and well-known interactions
to demonstrate the tools, not a source of medical advice.
"""

from toolwire_pharma.data import DataSettings, MedicineData
from toolwire_pharma.dosage import DosageInfoTool, DosageQuery
from toolwire_pharma.interactions import (
    InteractionAnalysisTool,
    InteractionDecomposition,
    InteractionRequest,
)
from toolwire_pharma.lookup import SubstanceLookupTool, SubstanceQuery
from toolwire_pharma.messages import InteractionQuestion, SubstanceFinding

__version__ = "0.1.0"

__all__ = [
    "DataSettings",
    "DosageInfoTool",
    "DosageQuery",
    "InteractionAnalysisTool",
    "InteractionDecomposition",
    "InteractionQuestion",
    "InteractionRequest",
    "MedicineData",
    "SubstanceFinding",
    "SubstanceLookupTool",
    "SubstanceQuery",
]
