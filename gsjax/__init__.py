"""gsjax: graph-structured, continuous-state linear bandits with movement costs, in JAX."""

__version__ = "0.1.0"
