"""Lenses beyond the logit lens: the Jacobian lens (Gurnee et al. 2026), fitted over a corpus in shards (in process
or on Ray), kept in TransformerLens' artifact format, and read beside the logit lens.

- ``jacobian``: the estimator (TransformerLens 4.3's ``JacobianLens.fit``, exactly) and the worker of one shard;
- ``artifact``: a fitted lens, saved and loaded as ``JacobianLens.save`` / ``load`` do, checked against its model;
- ``fit``: the driver: a corpus cut into shards, kept in an output folder, resumed, reduced in shard order;
- ``readout``: each layer's top-k tokens and p at every position, logit lens and J-lens.
"""
