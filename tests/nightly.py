"""The tests that run nightly (`make test-nightly`, .github/workflows/ci.yml's nightly run) instead of
in `make test`, which they kept past an hour (70 min on a 2-core VM): each runs real framework cells
for tens of seconds or minutes, builds an image, or measures what a busy machine spoils. Where a
narrower test of the same ground stays in `make test`, the reason names it. docs/testing.md lists
them with their reasons (a test holds the two lists equal).

Keys are pytest node ids or their prefix (a file, or a test with all its parameters); tests/conftest.py
marks every collected test they name with `nightly`, and `make test` deselects that mark."""

from __future__ import annotations

# the seconds: each one's time in a full run on a 2-core AMD EPYC VM (2 Dec 2026; make test was 70 min)
NIGHTLY: dict[str, str] = {
    'tests/test_bundle.py::test_offline_node_installs_and_runs_smoke':
        'builds the node bundle and installs it in a podman container, then runs the smoke suite there; make image-test runs the smoke suite in the CPU image in CI',  # 420 s
    'tests/test_link_stacks.py':
        "14 link cells of both frameworks; the link checks without a stack stay (test_link.py, test_link_split.py)",  # 216 s
    'tests/test_external_stacks.py':
        "registers interpreters and runs cells in them; the stack registry's checks stay (test_stacks.py)",  # 191 s
    'tests/test_site.py::test_every_page_in_chromium':
        'every committed page in Chromium; the injection checks in a real Chromium stay (test_markdown_safety.py) and the page tests without a browser (test_site.py)',  # 150 s
    'tests/test_stores.py':
        'both frameworks on LMDB stores; the store contract stays (test_pipeline_contract.py)',  # 129 s
    'tests/test_own_graph.py::test_a_real_cell_on_each_format_with_both_backends_and_lmdb':
        "a real cell on each of a user's graph formats; the format readers stay (the rest of test_own_graph.py)",  # 99 s
    'tests/test_calibrate.py::test_a_calibration_run_plants_its_slowdown_and_reads_its_pairs':
        "a calibration run of real cells; the calibration's options and arithmetic stay (test_calibrate.py, test_verdicts.py)",  # 96 s
    'tests/test_graph_level.py':
        'graph-level cells over every store and worker count',  # 106 s
    'tests/test_stages.py':
        'the stage split of real cells in both frameworks',  # 95 s
    'tests/test_paired.py::test_an_a_a_pair_reads_one_within_three_percent':
        'an A/A pair measured long enough to read 1 within 3 %: a measurement, spoiled by a busy machine',  # 83 s
    'tests/test_paired.py::test_a_planted_slowdown_is_found':
        'a planted slowdown measured in turns: a measurement, spoiled by a busy machine',  # 81 s
    'tests/test_hetero_end_to_end.py':
        'typed cells of both frameworks end to end; typed parity stays (test_parity.py)',  # 80 s
    'tests/test_to_target.py':
        'trains real cells to an accuracy target',  # 76 s
    'tests/test_end_to_end.py::test_crash_and_hang_are_recorded_and_leave_no_processes':
        "waits out a hanging cell's deadline; a crash in a turn stays (test_paired.py)",  # 67 s
    'tests/test_paired.py::test_a_group_whose_partner_is_skipped_still_pairs_the_cells_that_run':
        'a paired group of real cells with a skipped partner',  # 64 s
    'tests/test_distributed.py':
        'torch.distributed with 2 ranks (gloo) and a c10d rendezvous on loopback; the 2-node SLURM run stays (test_slurm.py)',  # 109 s
    'tests/test_typed_sources.py::test_ogbn_mag_fixture_and_own_typed_folder_train_on_both_backends':
        "typed cells on the ogbn-mag fixture and a user's typed folder; the readers stay",  # 58 s
    'tests/test_paired.py::test_cells_that_cannot_live_together_take_turns_as_whole_processes':
        'whole-process turns of real cells',  # 58 s
    'tests/test_ogb_link.py':
        "link cells on OGB fixtures and OGB's own loader and evaluator",  # 99 s
    'tests/test_paired.py::test_a_cell_stuck_in_its_turn_is_ended_and_its_partner_kept':
        "waits out a stuck turn's deadline",  # 48 s
    'tests/test_gpu_settings.py::test_on_a_machine_without_cuda_they_are_skipped_and_bf16_trains_on_the_cpu':
        'bf16 training of real cells on the CPU',  # 45 s
    'tests/test_session.py::test_gnnbench_run_and_pytest_write_the_same_cells_and_fields':
        'the same suite through both front doors, twice the cells',  # 45 s
    'tests/test_slurm.py::test_a_requeued_job_resumes_each_node_from_its_journal':
        'a second SLURM job after a requeue; one 2-node SLURM job stays (test_slurm.py)',  # 41 s
    'tests/test_paired.py::test_waiting_loader_workers_stay_quiet':
        "loader workers' CPU time measured across turns",  # 39 s
    'tests/test_fidelity_tasks.py':
        'plain loops of typed and link cells in both stacks',  # 93 s
    'tests/test_recover.py::test_a_real_journal_is_recovered_as_the_run_wrote_it':
        "a real run's journal; the journal reader's refusals stay (test_recover.py)",  # 36 s
    'tests/test_gpu_user_view.py::test_out_of_gpu_memory_is_recorded_as_oom_for_one_rank_and_for_two':
        'a run of planted out-of-memory cells (shares its run with the next test)',  # 35 s
    'tests/test_gpu_user_view.py::test_a_cpu_cell_records_why_no_gpu_was_sampled_and_the_nccl_facts':
        'shares the run above',  # 0 s
    'tests/test_pyg_dist.py':
        'partitioned torch_geometric.distributed cells',  # 55 s
    'tests/test_real_datasets.py':
        'OGB and Reddit readers on fixtures in the stacks',  # 110 s
    'tests/test_session.py::test_a_run_killed_half_way_is_finished_by_resume':
        'a real run killed and resumed; the journal and resume logic stays (test_recover.py, test_session.py)',  # 31 s
    'tests/test_site.py::test_no_setting_is_shown_as_a_placeholder':
        "renders every committed result's page",  # 29 s
    'tests/test_own_graph.py::test_pyg_file_unsafe_load_is_refused_unless_allowed':
        'loads a planted PyG file in the pyg stack',  # 27 s
    'tests/test_own_graph.py::test_pyg_file_round_trip_in_the_pyg_stack':
        'round trips PyG files in the pyg stack',  # 36 s
    'tests/test_clusters.py::test_two_pods_with_pet_variables_measure_one_cell_over_both':
        "two pods' worth of ranks on this machine; the manifests' schema checks stay (test_clusters.py)",  # 26 s
    'tests/test_cell_scratch.py::test_a_run_with_loader_workers_leaves_nothing_in_the_temporary_folder':
        'a real run with loader workers',  # 23 s
    'tests/test_fidelity.py::test_a_gpu_pair_without_a_gpu_is_skipped_with_why_and_the_run_goes_on':
        'a fidelity run over GPU pairs without a GPU',  # 22 s
    'tests/test_overhead.py':
        "gnnbench's own overhead measured on real cells",  # 56 s
    'tests/test_lifeline.py':
        'SIGKILL of gnnbench during real cells with loader workers',  # 33 s
    'tests/test_parity.py::test_a_planted_difference_fails_naming_the_layer_and_tensor':
        "seven planted differences, each a run of one framework's side; the parity checks themselves stay (test_parity.py)",  # 52 s
    'tests/test_fidelity.py::test_plain_loop_trains_in_its_stack':
        'plain loops in both stacks; the fidelity pairing logic stays (test_fidelity.py)',  # 30 s
    'tests/test_fidelity.py::test_side_by_side_runs_both_loops_in_one_process':
        'both plain loops in one process, in each stack',  # 16 s
    'tests/test_fidelity.py::test_a_stack_without_cuda_skips_its_gpu_pair_with_its_own_reason':
        'a fidelity run in each stack without CUDA',  # 18 s
    'tests/test_reliability_63.py::test_the_leak_check_runs_once_per_pipeline_and_never_in_a_measured_epoch':
        'link pipelines of both frameworks, with and without loader workers',  # 34 s
    'tests/test_memory_breakdown.py':
        "rank memory read against the kernel's PSS in real cells: a measurement",  # 29 s
    'tests/test_integrity.py::test_a_cell_on_a_half_deleted_store_rebuilds_it_and_trains':
        'rebuilds a store and trains on it',  # 14 s
    'tests/test_integrity.py::test_a_cell_on_a_corrupted_store_or_dataset_fails_naming_the_file':
        'real cells on corrupted stores',  # 13 s
    'tests/test_comm_hook.py::test_the_comm_hook_is_registered_only_when_profiling':
        'two ranks with and without profiling',  # 11 s
    'tests/test_session.py::test_the_rank_that_failed_first_is_the_headline_and_the_exit_code_says_a_cell_failed':
        'a real 2-rank run with a failing rank',  # 18 s
    'tests/test_releases.py::test_a_release_stack_builds_and_imports_its_release':
        'builds a PyG release stack where none is cached (132 s in a CI run)',  # 17 s
}
