"""The paper's experiments: the drivers of its sections and the reproduction report.

The top layer of the package: these modules use everything below them (configs, experiments,
tuning, plots) and nothing in the library imports them. ``gsjax reproduce`` reaches
:mod:`gsjax.paper.report` through the command's entry point (:mod:`gsjax.__main__`).

* :mod:`gsjax.paper.report` -- ``gsjax reproduce``: every paper config, one ``report.md``;
* :mod:`gsjax.paper.figure2` -- Section 5.3, Figure 2 (the joint factor-graph estimator);
* :mod:`gsjax.paper.adaptive_graph` -- Section 5.2 (adaptive graph refinement);
* :mod:`gsjax.paper.large_graphs` -- Section 5.1 at scale (async vs global lazy updates);
* :mod:`gsjax.paper.dp_scale` -- Section 5.1 with the exact solver up to 10^4 nodes (issue 17);
* :mod:`gsjax.paper.tune_vs_grid` -- gradient tuning against a grid at equal compute.
"""
