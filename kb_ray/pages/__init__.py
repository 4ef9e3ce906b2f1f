"""Visual page retrieval: render PDF pages, embed them as multivectors (ColQwen family),
store them content-addressed, and score queries against them with MaxSim."""
