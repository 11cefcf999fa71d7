"""The cost model: gradient-boosted trees (scikit-learn) learned from the tuning log, ranking
a problem's untried candidates so the budget goes to likely winners first.

Each measured (problem, schedule) is one sample: the problem's features (space.features:
GEMM sizes, conv geometry, fusions) and the schedule's (one-hot algo, parameters), and as
the target the log of its cost relative to the default schedule in the same job, which
carries across machines and to problems never measured. The trees are fitted with a fixed
random state on the log's samples in a fixed order, so the ranking depends on the log
alone.
"""
from __future__ import annotations

import json
import math

from ..errors import ConfigError
from .space import feature_names, sched_features

MIN_SAMPLES = 12


def _problem_vector(feats: dict, keys: list) -> list:
    return [math.log1p(max(0.0, float(feats.get(k, 0.0)))) for k in keys]


class CostModel:
    """fit(log) then rank(features, candidates); without enough samples the candidates keep
    the space's order."""

    def __init__(self, space: dict):
        self.names = feature_names(space)
        self.keys: list = []
        self.trees = None

    def fit(self, log) -> "CostModel":
        ratios = log.ratios()
        feats = {}
        for r in log.records:
            feats.setdefault(r["key"], r.get("features") or {})
        self.keys = sorted({k for f in feats.values() for k in f})
        X, y = [], []
        for key in sorted(ratios):
            for s, ratio in sorted(ratios[key].items()):
                if s == "{}" or ratio <= 0:
                    continue
                X.append(_problem_vector(feats[key], self.keys) +
                         sched_features(json.loads(s), self.names))
                y.append(math.log(ratio))
        if len(y) < MIN_SAMPLES:
            self.trees = None
            return self
        try:
            from sklearn.ensemble import GradientBoostingRegressor
        except ImportError:
            raise ConfigError("aicc tune needs scikit-learn for its cost model: "
                              "pip install 'aicc[tune]'") from None
        self.trees = GradientBoostingRegressor(n_estimators=120, max_depth=3, learning_rate=0.1,
                                               random_state=0).fit(X, y)
        return self

    def rank(self, feats: dict, cands: list) -> list:
        """cands ordered best predicted first (stable: equal predictions keep their order)."""
        if self.trees is None or not cands:
            return list(cands)
        X = [_problem_vector(feats, self.keys) + sched_features(c, self.names) for c in cands]
        pred = self.trees.predict(X)
        return [c for _, _, c in sorted(zip(pred, range(len(cands)), cands),
                                        key=lambda t: (t[0], t[1]))]
