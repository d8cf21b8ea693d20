"""The known objective of TestRandomStudyEndToEnd: its score is a function
of its four parameters (one of each kind a search space has), best at
x 0.3, lr 0.01, n 2 and act gelu. Only + - * so that the test, which works
it out again in Go from the trial's parameters, gets the same double.
"""

import json
import os
import sys
import time

args = dict(a.split("=", 1) for a in sys.argv[1:])
x, lr, n, act = float(args["x"]), float(args["lr"]), int(args["n"]), args["act"]
bonus = {"relu": 0.0, "tanh": -0.05, "gelu": 0.02}[act]
score = -(x - 0.3) * (x - 0.3) - 1000.0 * (lr - 0.01) * (lr - 0.01) - 0.01 * (n - 2) * (n - 2) + bonus
print(f"x={x} lr={lr} n={n} act={act}: score {score!r}", flush=True)
with open(os.environ["KLIQUE_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"name": "score", "value": score, "step": 1}) + "\n")
time.sleep(0.3)  # long enough for two trials to overlap
