"""Pacote do capítulo 6: dados sintéticos, agendamento, laço de treino, experimento, figuras e widget."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
import torch
from matplotlib.figure import Figure
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from transformer_course import data as D
from transformer_course import training as T
from transformer_course.experiments import ch06 as E
from transformer_course.plots import ch06 as P
from transformer_course.widgets.ch06 import NoamExplorer

CFG = D.TokenTaskConfig(max_len=16, min_len=4)


# ---------------------------------------------------------------- dados


def test_dataset_shapes_padding_and_vocabulary():
    data = D.make_token_classification(500, CFG, seed=3)
    N, T_ = data.token_ids.shape
    assert (N, T_) == (500, CFG.max_len) and data.token_ids.dtype == torch.long
    assert data.labels.shape == (500,) and data.lengths.shape == (500,)
    assert int(data.lengths.min()) >= CFG.min_len and int(data.lengths.max()) <= CFG.max_len
    positions = torch.arange(T_)
    real = positions < data.lengths[:, None]
    assert bool((data.token_ids[~real] == D.PAD_ID).all())
    assert bool((data.token_ids[real] != D.PAD_ID).all())
    assert int(data.token_ids.max()) < CFG.vocab_size
    assert set(data.labels.tolist()) == set(range(CFG.n_classes))


def test_dataset_is_seeded_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a = D.make_token_classification(300, CFG, seed=7)
    b = D.make_token_classification(300, CFG, seed=7)
    c = D.make_token_classification(300, CFG, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.token_ids, b.token_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.token_ids, c.token_ids)


def test_dataset_signal_fractions():
    cfg = dataclasses.replace(CFG, p_signal=0.3, p_confuser=0.2)
    data = D.make_token_classification(4000, cfg, seed=0)
    counts = data.band_counts()  # (N, C)
    n_real = data.lengths.sum().item()
    own = counts.gather(1, data.labels[:, None]).sum().item()
    assert own / n_real == pytest.approx(0.3, abs=0.02)
    assert (counts.sum().item() - own) / n_real == pytest.approx(0.2, abs=0.02)
    assert 0.5 < data.counting_baseline() < 1.0
    # a regra da contagem em qualquer subconjunto (o notebook a mede só no teste)
    assert D.counting_accuracy(data.token_ids, data.labels, cfg) == pytest.approx(data.counting_baseline())
    _, _, test = D.split_dataset(data, seed=0)
    ids, labels = test.tensors
    by_hand = (D.band_counts(ids, cfg).argmax(-1) == labels).float().mean().item()
    assert D.counting_accuracy(ids, labels, cfg) == pytest.approx(by_hand) and len(labels) == 600


def test_decode_names_tokens():
    data = D.make_token_classification(5, CFG, seed=0)
    words = data.decode(0).split()
    assert len(words) == int(data.lengths[0])
    assert "<pad>" not in words
    assert data.token_name(0) == "<pad>" and data.token_name(1) == "·1"
    assert data.token_name(CFG.first_class_token) == "A00"
    assert data.token_name(CFG.first_class_token + CFG.band_size + 7) == "B07"


@pytest.mark.parametrize(
    "bad",
    [
        {"min_len": 0},
        {"min_len": 20, "max_len": 10},
        {"n_classes": 1},
        {"p_signal": 0.8, "p_confuser": 0.5},
    ],
)
def test_dataset_rejects_invalid_config(bad):
    with pytest.raises(ValueError):
        D.make_token_classification(10, dataclasses.replace(CFG, **bad))
    with pytest.raises(ValueError):
        D.make_token_classification(0, CFG)


def test_trim_padding_and_loaders():
    data = D.make_token_classification(400, CFG, seed=1)
    train, val, test = D.split_dataset(data, seed=0)
    assert (len(train), len(val), len(test)) == (280, 60, 60)
    for x, y in D.make_loader(train, batch_size=32):
        assert x.shape[1] <= CFG.max_len and bool((x[:, -1] != D.PAD_ID).any())
        assert x.shape[0] == y.shape[0]
    first = [y.tolist() for _, y in D.make_loader(train, 32, shuffle=True, seed=5)]
    again = [y.tolist() for _, y in D.make_loader(train, 32, shuffle=True, seed=5)]
    other = [y.tolist() for _, y in D.make_loader(train, 32, shuffle=True, seed=6)]
    assert first == again and first != other
    with pytest.raises(ValueError):
        D.split_dataset(data, fractions=(0.5, 0.5, 0.5))


# ---------------------------------------------------------------- agendamento


@pytest.mark.parametrize(("d", "w", "f"), [(512, 4000, 1.0), (32, 30, 0.5), (64, 1, 2.0)])
def test_noam_shape(d, w, f):
    assert T.noam_lr(0, d, w, f) == T.noam_lr(1, d, w, f)
    lrs = [T.noam_lr(s, d, w, f) for s in range(1, 3 * w + 2)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == w
    assert lrs[w - 1] == pytest.approx(f * (d * w) ** -0.5)
    for bad in ((d, 0), (0, w), (-1, w)):
        with pytest.raises(ValueError):
            T.noam_lr(3, *bad)
    with pytest.raises(ValueError):
        T.noam_lr(-1, d, w)


def test_no_warmup_schedule_has_the_same_peak_and_decay():
    for s in (1, 10, 29, 30):
        assert T.no_warmup_lr(s, 32, 30, 0.5) == pytest.approx(T.noam_peak(32, 30, 0.5))
    for s in (30, 31, 100, 1000):
        assert T.no_warmup_lr(s, 32, 30, 0.5) == pytest.approx(T.noam_lr(s, 32, 30, 0.5))


def test_scheduler_resets_initial_lr_of_a_previously_scheduled_optimizer():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.3)
    LambdaLR(opt, lambda s: 1.0)  # deixa "initial_lr" = 0.3 no grupo
    sched = T.make_warmup_scheduler(opt, 64, 4)
    for k in range(6):
        assert opt.param_groups[0]["lr"] == pytest.approx(T.noam_lr(k, 64, 4))
        opt.step()
        sched.step()


# ---------------------------------------------------------------- laço, fit e experimento


def _tiny_setup(norm_first=True, seed=0):
    data = D.make_token_classification(192, CFG, seed=seed)
    train, val, _ = D.split_dataset(data, seed=0)
    torch.manual_seed(seed)
    from transformer_course.layers import TransformerClassifier

    model = TransformerClassifier(
        CFG.vocab_size,
        CFG.n_classes,
        d_model=16,
        n_heads=2,
        n_layers=1,
        d_ff=32,
        max_len=CFG.max_len,
        dropout=0.1,
        norm_first=norm_first,
    )
    return model, D.make_loader(train, 32, shuffle=True, seed=seed), D.make_loader(val, 64)


def test_train_epoch_and_evaluate_on_the_classifier():
    model, train, val = _tiny_setup()
    opt = torch.optim.Adam(model.parameters(), betas=T.ADAM_BETAS, eps=T.ADAM_EPS)
    sched = T.make_warmup_scheduler(opt, 16, 5)
    log: list = []
    out = T.train_epoch(model, train, opt, sched, E.LoggedLoss(nn.CrossEntropyLoss(), opt, log), 1.0)
    assert set(out) == {"loss", "accuracy"} and 0 <= out["accuracy"] <= 1
    assert len(log) == len(train) and log[0][1] == pytest.approx(T.noam_lr(0, 16, 5))
    model.eval()
    ev = T.evaluate(model, val, nn.CrossEntropyLoss())
    assert not model.training and 0 <= ev["accuracy"] <= 1 and math.isfinite(ev["loss"])


def test_fit_keeps_best_state_in_memory_and_writes_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, train, val = _tiny_setup()
    opt = torch.optim.Adam(model.parameters(), betas=T.ADAM_BETAS, eps=T.ADAM_EPS)
    sched = T.make_warmup_scheduler(opt, 16, 5)
    h = E.fit(model, train, val, opt, sched, nn.CrossEntropyLoss(), epochs=3, progress=False)
    assert list(tmp_path.iterdir()) == []
    assert len(h.train_loss) == len(h.val_loss) == 3 and len(h.step_lr) == 3 * len(train)
    assert h.best_epoch == 1 + min(range(3), key=h.val_loss.__getitem__)
    assert set(h.best_state) == set(model.state_dict())
    assert all(v.device.type == "cpu" for v in h.best_state.values())
    first_key = next(iter(h.best_state))
    assert h.best_state[first_key].data_ptr() != model.state_dict()[first_key].data_ptr()


def test_fit_with_a_student_loop_logs_every_step_like_the_reference():
    """`fit` com laço e avaliação "do aluno" (outras funções, sem `step_log`) dá o mesmo histórico."""

    def my_train(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
        return T.train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm)

    def my_eval(model, loader, loss_fn):
        return T.evaluate(model, loader, loss_fn)

    histories = []
    for train_fn, eval_fn in ((T.train_epoch, T.evaluate), (my_train, my_eval)):
        torch.manual_seed(0)
        model, train, val = _tiny_setup()
        opt = torch.optim.Adam(model.parameters(), betas=T.ADAM_BETAS, eps=T.ADAM_EPS)
        sched = T.make_warmup_scheduler(opt, 16, 5)
        histories.append(
            E.fit(model, train, val, opt, sched, nn.CrossEntropyLoss(), 2, progress=False,
                  train_fn=train_fn, eval_fn=eval_fn)
        )  # fmt: skip
    ref, mine = histories
    assert len(mine.step_lr) == 2 * len(train) and mine.step_lr == pytest.approx(ref.step_lr)
    assert mine.step_loss == pytest.approx(ref.step_loss) and mine.val_loss == pytest.approx(ref.val_loss)


def test_student_or_reference_uses_the_student_only_when_the_visible_check_passes(capsys):
    from transformer_course.checks import ch06

    def mine(model, loader, loss_fn):
        return T.evaluate(model, loader, loss_fn)

    def stub(model, loader, loss_fn):
        raise NotImplementedError()

    def wrong(model, loader, loss_fn):  # esquece o modo de avaliação
        return {"loss": 0.0, "accuracy": 0.0}

    assert E.student_or_reference(mine, ch06.check_evaluate, T.evaluate, "evaluate") is mine
    assert "usando a sua versão" in capsys.readouterr().out
    for fn, why in ((stub, "não implementou"), (wrong, "falhou"), (None, "")):
        assert E.student_or_reference(fn, ch06.check_evaluate, T.evaluate, "evaluate") is T.evaluate
        out = capsys.readouterr()
        assert "usando a versão do pacote" in out.out and why in out.out and out.err == ""


def _small_experiment(dropout: float = 0.0, epochs: int = 2):
    """Um experimento pequeno (2 sementes, 2 camadas) e o que ``run_warmup_experiment`` recebe."""
    data = D.make_token_classification(160, CFG, seed=0)
    train, val, _ = D.split_dataset(data, seed=0)
    from transformer_course.layers import TransformerClassifier

    def make_model(config, seed):
        torch.manual_seed(seed)
        return TransformerClassifier(
            CFG.vocab_size,
            CFG.n_classes,
            d_model=config.d_model,
            n_heads=config.n_heads,
            n_layers=config.n_layers,
            d_ff=config.d_ff,
            max_len=CFG.max_len,
            dropout=config.dropout,
            norm_first=config.norm_first,
        )

    config = E.ExperimentConfig(
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        warmup_steps=4,
        epochs=epochs,
        seeds=(0, 1),
        dropout=dropout,
    )
    return config, make_model, train, D.make_loader(val, 64)


def test_experiment_conditions_share_initialisation_and_batches():
    config, make_model, train, val_loader = _small_experiment(epochs=1)
    results = E.run_warmup_experiment(
        config, make_model, lambda s: D.make_loader(train, 32, True, s), val_loader, progress=False
    )
    assert set(results) == {"com aquecimento", "sem aquecimento"}
    with_w, without = results["com aquecimento"], results["sem aquecimento"]
    for a, b in zip(with_w, without):
        assert a.step_loss[0] == pytest.approx(b.step_loss[0], rel=1e-6)  # mesmos pesos, mesmo lote
        assert a.step_lr[0] < b.step_lr[0] == pytest.approx(config.peak_lr)
        assert a.best_state is None
    assert with_w[0].step_loss[0] != pytest.approx(with_w[1].step_loss[0])  # sementes diferentes
    rows = E.summarize(results, config.seeds)
    assert len(rows) == 4 and {r["condição"] for r in rows} == set(results)


# ---------------------------------------------------------------- figuras e widget


def test_figures_are_figures():
    data = D.make_token_classification(100, CFG, seed=0)
    assert isinstance(P.dataset_overview(data.labels, data.lengths, 3, ["A", "B", "C"]), Figure)
    assert isinstance(P.noam_curves([(64, 10, 1.0), (32, 20, 2.0)], T.noam_lr, 60), Figure)
    h = E.History(
        train_loss=[1.0, 0.8],
        train_accuracy=[0.4, 0.6],
        val_loss=[0.9, 0.85],
        val_accuracy=[0.5, 0.6],
        step_loss=[1.1, 1.0, 0.9, 0.8],
        step_lr=[0.1, 0.2, 0.2, 0.1],
        best_epoch=2,
    )
    assert isinstance(P.training_curves(h), Figure)
    assert isinstance(
        P.warmup_experiment_figure({"com aquecimento": [h], "sem aquecimento": [h]}, 1.1), Figure
    )


def test_noam_widget_marks_the_peak_and_is_fast():
    explorer = NoamExplorer()
    cases = [(100, 32, 0.5), (4000, 512, 1.0), (8000, 1024, 2.0), (2500, 128, 4.0)]
    times = []
    for w, d, f in cases * 3:
        start = time.perf_counter()
        fig = explorer.update(w, d, f)
        times.append(time.perf_counter() - start)
        assert isinstance(fig, Figure)
        (px,), (py,) = explorer.peak.get_data()
        assert px == w and py == pytest.approx(T.noam_lr(w, d, w, f))
        xs, ys = explorer.line.get_data()
        assert max(ys) == pytest.approx(py)
    # Tempo: medido por `make bench`, não afirmado aqui (oscila numa máquina ocupada).


def test_widget_builds_with_three_sliders():
    from transformer_course.widgets import noam_widget

    box = noam_widget()
    labels = [child.description for child in box.children[:3]]
    assert labels == ["warmup_steps", "d_model", "factor"]


def test_experiment_in_threads_gives_the_same_histories_as_in_sequence():
    config, make_model, train, val_loader = _small_experiment()
    runs = [
        E.run_warmup_experiment(
            config,
            make_model,
            lambda s: D.make_loader(train, 32, True, s),
            val_loader,
            progress=False,
            workers=w,
        )
        for w in (1, 2, 4)
    ]
    for other in runs[1:]:
        for name in runs[0]:
            for a, b in zip(runs[0][name], other[name]):
                assert (a.step_loss, a.step_lr, a.val_loss, a.val_accuracy) == (
                    b.step_loss,
                    b.step_lr,
                    b.val_loss,
                    b.val_accuracy,
                ), f"{name}: o treino em threads mudou o histórico"


def test_experiment_with_dropout_trains_one_run_at_a_time():
    # Com dropout, duas threads sorteariam do mesmo gerador global: os treinos vão em sequência.
    import threading

    config, make_model, train, val_loader = _small_experiment(dropout=0.1)
    lock, active, most = threading.Lock(), [0], [0]

    class Counted:
        def __init__(self, loader):
            self.loader = loader

        def __len__(self):
            return len(self.loader)

        def __iter__(self):
            with lock:
                active[0] += 1
                most[0] = max(most[0], active[0])
            try:
                for batch in self.loader:
                    time.sleep(0.002)  # dá tempo de outra thread entrar, se pudesse
                    yield batch
            finally:
                with lock:
                    active[0] -= 1

    E.run_warmup_experiment(
        config,
        make_model,
        lambda s: Counted(D.make_loader(train, 32, True, s)),
        val_loader,
        progress=False,
        workers=4,
    )
    assert most[0] == 1, "com dropout, dois treinos rodaram ao mesmo tempo"
