"""`aicc tune`: measured schedule choice (docs/TUNING.md). space: problems and candidates;
trial: one job (compile the candidates into a bundle, time its steps); search: the rounds
within a budget; model: the cost model ranking candidates; log: the tuning log and its
choices; apply: `aicc build --tuning`; ray_exec: jobs on a Ray cluster."""
