"""Importers of the real bulk formats into the knowledge store, one module per source (openFDA labels, PubMed XML, ClinicalTrials.gov studies) and the driver that runs them."""
