"""Understanding viewers by meaning: normalisation, a trained screening classifier, retrieval of facts
over the catalog's own data, and description similarity for skill and tool choice."""
