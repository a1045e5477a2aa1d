"""AMK Layer 2, the scheduler: graph import, lowering, the standard IR, cost model, search."""
