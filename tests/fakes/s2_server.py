"""The Semantic Scholar stand-in now lives in :mod:`arcticqa.standins.s2` (the rehearsal bench
uses it too); the tests import it from here as before."""

from arcticqa.standins.s2 import BATCH_PATH, BULK_PATH, Fault, RecordedRequest, S2StandIn

__all__ = ["S2StandIn", "RecordedRequest", "Fault", "BULK_PATH", "BATCH_PATH"]
