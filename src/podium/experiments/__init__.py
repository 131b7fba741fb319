"""The papers' ablations as runnable configs (``experiments/*.yaml``): arms that differ in one respect, trained with
``podium train`` machinery when they need it, evaluated with ``podium eval`` machinery, and compared side by side
in ``podium report``'s HTML. This layer sits above evaluation and training because an experiment uses both."""

from podium.experiments.config import Experiment, ExperimentConfig, arm_errors, load_experiment
from podium.experiments.runner import ArmResult, run_experiment

__all__ = ["ArmResult", "Experiment", "ExperimentConfig", "arm_errors", "load_experiment", "run_experiment"]
