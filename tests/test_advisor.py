"""The advisor's conclusions on crafted results: each rule, with the numbers it must quote."""

from __future__ import annotations


from bench.publish import advisor
from tests import synthetic_results as sr

MIB = 2**20


def one_run(tmp_path, benches, unmeasured=(), name="run.json", **run_kw):
    return sr.write(tmp_path, name, sr.run(benches, unmeasured_cells=list(unmeasured), **run_kw))


def only(advices):
    assert len(advices) == 1
    return advices[0]


def test_scaling_loss_is_explained_by_the_loader_stall(tmp_path):
    ws1, ws4 = sr.cell_id(ws=1), sr.cell_id(ws=4)
    result = one_run(tmp_path, [sr.bench(ws1, [0.020] * 5, loader_stall=0.25),
                                sr.bench(ws4, [0.046] * 5, loader_stall=0.70, comm_s=0.0046)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == ws1
    scaling = [e for e in advice.evidence if "rank" in e and "beats" in e]
    assert scaling == [f"1 rank beats 4 by 2.30x on pyg-neighbor/toy/mode=cpu-cpu/workers=0: at 4 ranks 70 % "
                       f"of each epoch waits for the loader and 10 % is communication [{ws1}, {ws4}]."]


def test_scaling_gain_is_reported_with_its_efficiency(tmp_path):
    ws1, ws2 = sr.cell_id(ws=1), sr.cell_id(ws=2)
    result = one_run(tmp_path, [sr.bench(ws1, [0.30] * 5), sr.bench(ws2, [0.20] * 5, peak_pss_bytes=500 * MIB,
                                                                    total_pss_bytes=900 * MIB)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == ws2   # 1.5x faster: no near tie, memory does not decide
    assert any(e.startswith("2 ranks are 1.50x faster than 1 on pyg-neighbor/toy/mode=cpu-cpu/workers=0 "
                            "(scaling efficiency 75 %)") for e in advice.evidence)


def test_failing_setting_pattern_becomes_a_caution_with_what_ran(tmp_path):
    gb = "dgl-graphbolt"
    ok = [sr.bench(sr.cell_id(gb, mode=m, workers=w), [0.05 + 0.01 * w] * 5)
          for m, w in [("cpu-cpu", 0), ("cpu-cpu", 2), ("cpu-cpu", 4), ("pinned-cuda", 0)]]
    failed = [sr.unmeasured(sr.cell_id(gb, mode="pinned-cuda", workers=2), "failed",
                            "RuntimeError: CUDA error: initialization error\nmore"),
              sr.unmeasured(sr.cell_id(gb, mode="pinned-cuda", workers=4), "timeout", "no result after 300 s")]
    skipped = [sr.unmeasured(sr.cell_id("pyg-dist"), "skipped", "pyg-lib is not installed")]
    advice = only(advisor.advise([one_run(tmp_path, ok, failed + skipped)]))
    assert advice.cautions[0] == (
        "dgl-graphbolt with mode=pinned-cuda and num_workers 2 or 4 does not run (failed 1, timeout 1 of 2; "
        "e.g. 'RuntimeError: CUDA error: initialization error') "
        f"[{failed[0]['id']}, {failed[1]['id']}]; with mode=pinned-cuda, num_workers 0 ran: use num_workers 0 "
        f"[{sr.cell_id(gb, mode='pinned-cuda', workers=0)}].")
    assert advice.cautions[1] == f"1 pyg-dist cell(s) skipped: pyg-lib is not installed [{skipped[0]['id']}]."
    assert advice.recommended == sr.cell_id(gb, mode="cpu-cpu", workers=0)


def test_memory_cheaper_near_tie_is_recommended(tmp_path):
    fast, lean, leanest_slow = sr.cell_id(workers=0), sr.cell_id(workers=2), sr.cell_id(workers=4)
    result = one_run(tmp_path, [sr.bench(fast, [0.100] * 5, total_pss_bytes=800 * MIB),
                                sr.bench(lean, [0.105] * 5, total_pss_bytes=400 * MIB),
                                sr.bench(leanest_slow, [0.200] * 5, total_pss_bytes=300 * MIB)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == lean
    assert "within 5 % of the fastest, with 50 % less memory" in advice.summary
    assert f"{lean} needs 50 % less memory than the fastest {fast} (400 MiB vs 800 MiB)" in advice.evidence[1]


def test_small_memory_saving_does_not_beat_the_fastest(tmp_path):
    fast, lean = sr.cell_id(workers=0), sr.cell_id(workers=2)
    result = one_run(tmp_path, [sr.bench(fast, [0.100] * 5, total_pss_bytes=800 * MIB),
                                sr.bench(lean, [0.105] * 5, total_pss_bytes=760 * MIB)])
    assert only(advisor.advise([result])).recommended == fast


def test_much_lower_accuracy_is_not_recommended_and_said_so(tmp_path):
    fast, accurate = sr.cell_id("dgl-graphbolt"), sr.cell_id("pyg-neighbor")
    result = one_run(tmp_path, [sr.bench(fast, [0.050] * 5, test_acc=0.50),
                                sr.bench(accurate, [0.080] * 5, test_acc=0.80)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == accurate
    note = next(e for e in advice.evidence if e.startswith(fast))
    margin = 3 * ((0.8 * 0.2 + 0.5 * 0.5) / 1000) ** 0.5
    assert f"is 1.60x faster than {accurate}" in note
    assert f"test accuracy 0.500 against the best 0.800" in note and f"{margin:.3f} that 1000 test nodes" in note


def test_accuracy_within_sampling_noise_keeps_the_fastest(tmp_path):
    fast, other = sr.cell_id("dgl-graphbolt"), sr.cell_id("pyg-neighbor")
    result = one_run(tmp_path, [sr.bench(fast, [0.050] * 5, test_acc=0.78),
                                sr.bench(other, [0.080] * 5, test_acc=0.80)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == fast
    assert "1.60x ahead of the next" in advice.evidence[0]
    assert not any("not recommended" in e for e in advice.evidence)


def test_a_gap_under_one_point_near_100_percent_keeps_the_fastest(tmp_path):
    # the binomial error of 1.000 on 1,000 test nodes is zero: without a floor, 0.997 would be
    # "much lower" and a 3x slower configuration recommended
    fast, other = sr.cell_id("dgl-graphbolt"), sr.cell_id("pyg-neighbor")
    result = one_run(tmp_path, [sr.bench(fast, [0.030] * 5, test_acc=0.997),
                                sr.bench(other, [0.090] * 5, test_acc=1.0)])
    assert only(advisor.advise([result])).recommended == fast
    worse = one_run(tmp_path, [sr.bench(fast, [0.030] * 5, test_acc=0.95),
                                     sr.bench(other, [0.090] * 5, test_acc=1.0)], name="worse.json")
    assert only(advisor.advise([worse])).recommended == other


def test_loader_only_cells_are_not_candidates(tmp_path):
    loader = sr.cell_id() + "/model=none"
    trained = sr.cell_id("dgl-graphbolt")
    result = one_run(tmp_path, [sr.bench(loader, [0.01] * 5, val_acc=None, test_acc=None),
                                sr.bench(trained, [0.05] * 5)])
    advice = only(advisor.advise([result]))
    assert advice.recommended == trained
    assert any(loader in e and "loader alone" in e for e in advice.evidence)


def test_one_advice_per_dataset_and_machine_latest_run_counts(tmp_path):
    a, b = sr.cell_id("pyg-neighbor"), sr.cell_id("dgl-graphbolt")
    old = one_run(tmp_path, [sr.bench(a, [0.05] * 5), sr.bench(b, [0.09] * 5)], name="old.json")
    new = one_run(tmp_path, [sr.bench(a, [0.09] * 5), sr.bench(b, [0.05] * 5)], name="new.json",
                  when="2026-02-01T00:00:00+00:00")
    gpu = one_run(tmp_path, [sr.bench(a, [0.01] * 5)], name="gpu.json", node="gpu-box", cpu="Other CPU")
    advices = {x.machine: x for x in advisor.advise([new, gpu, old])}
    assert set(advices) == {"box (Test CPU x2)", "gpu-box (Other CPU x2)"}
    assert advices["box (Test CPU x2)"].recommended == b
    assert "new.json" in advices["box (Test CPU x2)"].evidence[0]
    assert advices["gpu-box (Other CPU x2)"].recommended == a


def test_no_trained_cell_means_no_recommendation(tmp_path):
    result = one_run(tmp_path, [], [sr.unmeasured(sr.cell_id(), "failed", "boom")])
    advice = only(advisor.advise([result]))
    assert advice.recommended is None and "nothing to recommend" in advice.summary
    assert advice.cautions and "does not run" in advice.cautions[0]


# --- every task: typed graphs on their target type, link prediction by MRR and Hits@K -----------------

def link_bench(cid: str, seconds: float, mrr: float | None, leaked: int = 0, **extra) -> dict:
    """A link cell as the link backends record one: no accuracy, MRR and Hits@K over its test edges."""
    return sr.bench(cid, [seconds] * 5, val_acc=None, test_acc=None, val_mrr=mrr, test_mrr=mrr,
                    test_hits=None if mrr is None else {"10": 0.6, "50": 0.9},
                    link_split={"num_test_pos": 2000}, leaks={"batches": 10, "leaked_batches": 10 if leaked else 0,
                                                              "sampled_edges": 1000, "leaked_edges": leaked}, **extra)


def test_a_typed_run_is_advised_on_its_target_types_accuracy(tmp_path):
    card = sr.DATASET_CARD | {"target": "paper"}
    fast, slow = sr.cell_id("dgl-graphbolt-hetero"), sr.cell_id("pyg-hetero")
    advice = only(advisor.advise([one_run(tmp_path, [sr.bench(fast, [0.05] * 5, dataset=card, test_acc=0.50),
                                                     sr.bench(slow, [0.08] * 5, dataset=card, test_acc=0.80)])]))
    assert advice.recommended == slow
    assert advice.summary.endswith("configurations that train to a comparable test accuracy on paper nodes.")
    assert advice.evidence[0].startswith(f"{slow}: 0.08 s median epoch, test accuracy on paper nodes 0.800, ")
    assert any(e.startswith(f"{fast} is 1.60x faster") and "reaches test accuracy on paper nodes 0.500 against the "
               "best 0.800" in e and "that 1000 test nodes explain" in e for e in advice.evidence)


def test_a_link_run_is_advised_by_mrr_with_hits_at_k_and_its_test_edges(tmp_path):
    fast, best, loader = (sr.cell_id("dgl-graphbolt-link"), sr.cell_id("pyg-link"),
                          sr.cell_id("pyg-link", workers=2) + "/model=none")
    run = one_run(tmp_path, [link_bench(fast, 0.05, 0.10), link_bench(best, 0.08, 0.25), link_bench(loader, 0.01, None)])
    advice = only(advisor.advise([run]))
    assert advice.recommended == best and "nothing to recommend" not in advice.summary
    assert advice.summary.endswith("configurations that train to a comparable test MRR.")
    assert advice.evidence[0].startswith(f"{best}: 0.08 s median epoch, test MRR 0.250 (Hits@10 0.600, Hits@50 0.900), ")
    margin = 3 * ((0.25 * 0.75 + 0.1 * 0.9) / 2000) ** 0.5
    assert any(e.startswith(f"{fast} is 1.60x faster") and "reaches test MRR 0.100 against the best 0.250" in e
               and f"the {max(margin, 0.01):.3f} that 2000 test edges explain" in e for e in advice.evidence)
    assert any(loader in e and "loader alone" in e for e in advice.evidence)


def test_a_link_cell_whose_mrr_includes_the_leak_is_no_candidate_beside_one_without(tmp_path):
    leaky, clean = sr.cell_id("pyg-link"), sr.cell_id("pyg-link", workers=2)
    advice = only(advisor.advise([one_run(tmp_path, [link_bench(leaky, 0.05, 0.26, leaked=40),
                                                     link_bench(clean, 0.08, 0.25)])]))
    assert advice.recommended == clean
    assert any(e.startswith("1 cell(s) trained on batches that sampled their own positive seed edges") and leaky in e
               for e in advice.evidence)
    alone = only(advisor.advise([one_run(tmp_path, [link_bench(leaky, 0.05, 0.26, leaked=40)], name="leaky.json")]))
    assert alone.recommended == leaky  # nothing without the leak ran: the leaky cell is what there is


def test_each_task_of_a_dataset_is_advised_apart(tmp_path):
    node, link = sr.cell_id("pyg-neighbor"), sr.cell_id("pyg-link")
    advices = advisor.advise([one_run(tmp_path, [sr.bench(node, [0.05] * 5), link_bench(link, 0.01, 0.2)])])
    assert sorted(a.recommended for a in advices) == sorted([node, link])
    assert {a.dataset for a in advices} == {"toy"}


def test_the_link_and_typed_suite_pages_carry_the_recommendation(tmp_path):
    from bench.publish import results, site

    card = sr.DATASET_CARD | {"target": "paper"}
    link = sr.cell_id("pyg-link")
    typed = sr.cell_id("pyg-hetero")
    runs = [one_run(tmp_path, [link_bench(link, 0.05, 0.2)], name="link.json", suite="link"),
            one_run(tmp_path, [sr.bench(typed, [0.05] * 5, dataset=card)], name="hetero.json", suite="hetero")]
    site.build([results.read(r.path) for r in runs], tmp_path / "site")
    for suite, cell, said in (("link", link, "test MRR 0.200"), ("hetero", typed, "test accuracy on paper nodes 0.780")):
        page = (tmp_path / "site" / f"suite-{suite}.html").read_text()
        assert f"use {cell}" in page and said in page and "nothing to recommend" not in page
