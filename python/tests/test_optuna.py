"""The Optuna snippet of docs/python.md, run as written: a study whose trials prune through the fit
callback. Skipped, with the reason, only where optuna cannot be imported."""
import pathlib
import re

import pytest

from extras import import_or_skip

optuna = import_or_skip("optuna", "OPTUNA", "pip install optuna")
pytest.importorskip("pandas")

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _snippets() -> list:
    text = DOC.read_text()
    section = text[text.index("\n## Optuna"):text.index("\n## Qlib")]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def _snippet() -> str:
    return _snippets()[0]


def test_optuna_snippet_runs_and_prunes():
    ns: dict = {}
    exec(compile(_snippet(), f"{DOC}:Optuna", "exec"), ns)
    study = ns["study"]
    states = [t.state for t in study.trials]
    assert len(states) == 6
    assert states.count(optuna.trial.TrialState.COMPLETE) >= 2
    assert set(ns["best"]) == {"lr", "weight_decay"}
    assert study.best_value > 0.3, study.best_value   # the synthetic label is learnable
    # Every trial reported its validations; a pruned one stopped before the last of them.
    for t in study.trials:
        assert t.intermediate_values, t.number
        if t.state == optuna.trial.TrialState.PRUNED:
            assert max(t.intermediate_values) < 120, t.intermediate_values


def test_callback_false_stops_at_the_step():
    # What pruning relies on: returning False at a validation ends the run right after that step.
    ns: dict = {}
    code = _snippet().split("def objective")[0]  # data and base config only
    exec(compile(code, f"{DOC}:Optuna", "exec"), ns)
    mlalpha = ns["mlalpha"]
    seen = []

    def stop_at_40(e):
        if e["kind"] == "eval":
            seen.append(e["step"])
            return e["step"] < 40
        return True

    run = mlalpha.fit(ns["panel"], ns["base"], device="cpu", callback=stop_at_40)
    assert run.stopped and seen == [20, 40]
    assert run.last.step == 40
    assert int(run.history["step"].max()) == 40


def test_walk_forward_reports_every_fold_at_growing_steps():
    # The second snippet: a walk-forward study reporting at event["global_step"]; every fold's validations
    # reach the trial, at steps that keep growing (the engine's step restarts in each fold).
    ns: dict = {}
    first, second = _snippets()
    exec(compile(first.split("def objective")[0], f"{DOC}:Optuna", "exec"), ns)
    exec(compile(second, f"{DOC}:Optuna walk-forward", "exec"), ns)
    study = ns["study_wf"]
    assert len(study.trials) == 3
    for t in study.trials:
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        assert sorted(t.intermediate_values) == [20, 40, 60, 80, 100, 120, 140, 160, 180], t.intermediate_values
    assert study.best_value > 0.3
