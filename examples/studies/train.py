"""A tiny training run for the study examples (docs/studies.md).

Its accuracy is a known function of its parameters, best at lr 0.1 and
3 layers, and grows each epoch towards it, so a study over lr and layers
has a known best trial and successive halving can tell poor trials early.
It reports accuracy each epoch through the file the worker gives it.
"""

import argparse
import json
import math
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--sleep", type=float, default=0.3, help="seconds per epoch")
args = ap.parse_args()

quality = 0.95 - 0.2 * (math.log10(args.lr) + 1) ** 2 - 0.03 * (args.layers - 3) ** 2
metrics = os.environ.get("KLIQUE_METRICS_FILE")
for epoch in range(1, args.epochs + 1):
    accuracy = quality * (1 - 0.5**epoch)
    print(f"epoch {epoch}: accuracy {accuracy:.4f}", flush=True)
    if metrics:
        with open(metrics, "a") as f:
            f.write(json.dumps({"name": "accuracy", "value": accuracy, "step": epoch}) + "\n")
    time.sleep(args.sleep)
