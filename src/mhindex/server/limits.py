"""What one server takes on: `mhindex serve`'s options are these fields (kept apart from the app so that
the command line reads them without loading the server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.options import option

#: how a client gives the key `serve --api-key` requires (server/app.py's Guard reads them all)
API_KEY_HELP = (
    "Require this key: Authorization: Bearer KEY, X-API-Key, http://key:KEY@HOST, /k/KEY/... or ?api_key=KEY "
    "\\[default: $MHINDEX_API_KEY, else none]."
)


@dataclass(frozen=True)
class Limits:
    # More is answered with this many, as ColBERT's server caps k at 100.
    max_k: int = option(100, "Most paragraphs a query gets; asking for more gets this many.", min=1)
    # Search-R1's training sends 512 queries a search step (PPO) or 2,560 (GRPO) in one request.
    max_batch: int = option(4096, "Most queries in one batch request (Search-R1's GRPO sends 2,560).", min=1)
    max_body_bytes: int = 8_000_000
    body_seconds: float = 30.0  # a request body must arrive within this time
    workers: int = option(4, "Searches run at once (in threads).", min=1, max=256)

    def public(self) -> dict[str, Any]:
        return {"max_k": self.max_k, "max_batch": self.max_batch, "max_body_bytes": self.max_body_bytes}
