"""Klique's Python SDK (standard library only).

    import klique
    run = klique.init(project="fraud-models", name="train")
    params = run.connect({"lr": 0.1, "epochs": 3})
    run.log_metric("loss", 0.42, step=1)
    run.upload_artifact("model.pt", "out/model.pt")
    run.execute_remotely(compute_resource="1 A100")  # optional: hand it to a GPU

Pipelines (a graph of steps, each a task on its own compute resource) are
built with klique.Pipeline, as a builder or with decorators; see
klique/pipeline.py.

On your machine init records a run in state "running locally"; under a
Klique worker the same call attaches to the task the worker runs. See
sdk/python/README.md and docs/experiments.md ("The Python SDK").
"""

from ._http import KliqueError
from ._run import Run, current, init
from .client import Client
from .pipeline import Pipeline, Ref, Step
from .pipeline_run import PipelineRun, PipelineStep

__all__ = ["init", "Run", "Client", "KliqueError", "current", "Pipeline", "Step", "Ref", "PipelineRun", "PipelineStep"]
__version__ = "0.1.0"
