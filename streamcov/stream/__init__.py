"""The streaming engine: one path from any store to features, a learner and predictions.

* :mod:`.source`: the protocol a modality implements (:mod:`.skeleton`, :mod:`.image`);
* :mod:`.runtime`: threads or a dask.distributed cluster;
* :mod:`.featurize`: the one driver filling a resumable feature store (:mod:`.featurestore`);
* :mod:`.sgd`: the incremental learner over a feature store; :mod:`.exact`: the exact kernel SVM;
* :mod:`.model`, :mod:`.predict`: models saved without pickle, and applied to new stores.
"""
