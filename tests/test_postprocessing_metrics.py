"""evaluation_metrics.py and the shared loaders: alignment errors, offline data, and metric values checked
against direct sacrebleu / rouge_score / nltk / bert-score calls on a hand-made fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

from Postprocessing import answer_metrics as am
from Postprocessing import answer_scoring, common, metric_catalogue, offline_data
from ragstudy.scoring.groundtruth import UNANSWERABLE_ORACLE
from ragstudy_cli import app

ANSWER_METRICS = [m.name for m in metric_catalogue.in_group("answers") if m.aggregation != "corpus"]

FIXTURE = REPO / "tests" / "fixtures" / "postprocessing" / "basic"
STEMS = {"paragraph": "DatasetCustom", "fixed-size": "DatasetFixedSize", "newline": "DatasetNewLine"}


@pytest.fixture(scope="session")
def direct_bert_scorer(minilm_path):
    """bert-score loaded directly, once per session (the MiniLM folder loads offline in < 1 s)."""
    import torch
    from bert_score import BERTScorer

    torch.set_num_threads(1)
    return BERTScorer(model_type=minilm_path, num_layers=6, device="cpu")


@pytest.fixture(scope="session")
def nltk_data_ready(tmp_path_factory):
    if not (offline_data.WORDNET_SOURCE / "data.noun").exists():
        pytest.skip(f"Debian WordNet absent; install with: {offline_data.APT_LINE}")
    return offline_data.ensure_nltk_data()


@pytest.fixture()
def results(tmp_path) -> Path:
    """A writable copy of the fixture."""
    dst = tmp_path / "results"
    shutil.copytree(FIXTURE, dst)
    return dst


def _load(results: Path, allow_partial: bool = False):
    questions, oracle = common.load_questions_and_oracle(results / "Questions.csv", results / "Oracle.csv")
    answers = common.load_all_answers(results, questions, results / "Questions.csv")
    return questions, oracle, answers, common.common_question_indices(answers, len(questions), allow_partial)


def _edit_csv(path: Path, edit) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(frame).to_csv(path, index=False)


# ------------------------------------------------------------------------------------------ loading and alignment

def test_fixture_loads_all_three_strategies_in_registry_order(results):
    _, _, answers, indices = _load(results)
    assert [a.strategy for a in answers] == ["paragraph", "fixed-size", "newline"]
    assert indices == list(range(6))


def test_json_files_give_the_same_rows_as_csv(results):
    questions, _ = common.load_questions_and_oracle(results / "Questions.csv", results / "Oracle.csv")
    from_csv = common.load_all_answers(results, questions, results / "Questions.csv", "csv")
    from_json = common.load_all_answers(results, questions, results / "Questions.csv", "json")
    assert [a.rows for a in from_csv] == [a.rows for a in from_json]


def test_changed_question_text_is_an_error_naming_file_and_row(results):
    _edit_csv(results / "DatasetFixedSize.csv",
              lambda f: f.assign(question=f["question"].where(f.index != 2, "Una domanda diversa?")))
    with pytest.raises(common.DataError, match=r"DatasetFixedSize\.csv row 4 \(question_index 2\)"):
        _load(results)


def test_empty_answer_is_an_error_naming_file_and_row(results):
    _edit_csv(results / "DatasetNewLine.csv", lambda f: f.assign(answer=f["answer"].where(f.index != 1, "")))
    with pytest.raises(common.DataError, match=r"DatasetNewLine\.csv row 3 \(question_index 1\): empty answer"):
        _load(results)


def test_strategy_missing_a_question_is_an_error_not_a_misalignment(results):
    _edit_csv(results / "DatasetCustom.csv", lambda f: f.drop(index=3))
    with pytest.raises(common.DataError, match=r"DatasetCustom\.csv has no answer for question_index 3"):
        _load(results)
    _, _, answers, indices = _load(results, allow_partial=True)
    assert indices == [0, 1, 2, 4, 5]


def test_questions_and_oracle_of_different_length_is_an_error(results):
    _edit_csv(results / "Oracle.csv", lambda f: f.iloc[:-1])
    with pytest.raises(common.DataError, match=r"Questions\.csv has 6 rows but .*Oracle\.csv has 5"):
        _load(results)


def test_limited_run_prefix_is_scored_and_counted(results, caplog):
    for stem in STEMS.values():
        _edit_csv(results / f"{stem}.csv", lambda f: f.iloc[:4])
    with caplog.at_level("WARNING"):
        *_, indices = _load(results)
    assert indices == [0, 1, 2, 3]
    assert "Scoring 4 of 6 questions" in caplog.text


def test_out_of_range_index_is_an_error(results):
    _edit_csv(results / "DatasetCustom.csv", lambda f: f.assign(question_index=f["question_index"].replace("5", "9")))
    with pytest.raises(common.DataError, match=r"DatasetCustom\.csv row 7: question_index 9 is outside"):
        _load(results)


# ------------------------------------------------------------------------------------------ offline data, cleaning

def test_italian_stopwords_come_from_debian_snowball_list(nltk_data_ready, tmp_path, monkeypatch):
    words = offline_data.italian_stopwords()
    assert len(words) == 279
    assert {"perché", "più", "è", "non", "della"} <= words
    path = offline_data.ensure_stopwords(tmp_path / "nltk_data")
    assert set(path.read_text(encoding="utf-8").split("\n")[:-1]) == words
    # idempotent: an existing list is kept, not rebuilt from the Debian file
    monkeypatch.setattr(offline_data, "read_debian_italian_stopwords", lambda: pytest.fail("stopwords rebuilt"))
    assert offline_data.ensure_stopwords(tmp_path / "nltk_data") == path


def test_wordnet_copy_works_for_nltk(nltk_data_ready):
    wn = offline_data.wordnet_reader()
    assert wn.synsets("dog")[0].lexname() == "noun.animal"
    assert (offline_data.nltk_data_dir() / "corpora" / "wordnet" / "lexnames").read_text().count("\n") == 45


def test_missing_debian_package_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(offline_data, "WORDNET_SOURCE", tmp_path / "nowhere")
    with pytest.raises(offline_data.OfflineDataError, match="wordnet-base"):
        offline_data.ensure_wordnet(tmp_path / "nltk_data")


def test_clean_text_is_the_papers_cleaning(nltk_data_ready):
    stop = offline_data.italian_stopwords()
    assert am.clean_text(UNANSWERABLE_ORACLE, stop) == "contesto fornito contiene risposta"
    assert am.clean_text("Perché la città è più bella dell'AOO?", stop) == "città bella aoo"


# ------------------------------------------------------------------------------------------ metric values

def test_unicode_rouge_tokenizer_keeps_accents_and_hand_value():
    assert am.UnicodeWordTokenizer().tokenize("Perché città è più") == ["perché", "città", "è", "più"]
    ref, hyp = "la città è bella", "la città bella"
    uni = am.rouge_scores([hyp], [ref], am.MetricsConfig(rouge_tokenizer="unicode"))
    assert uni["ROUGE-1"][0] == pytest.approx(2 * 1.0 * 0.75 / 1.75)  # P = 3/3, R = 3/4
    default = am.rouge_scores(["più città"], ["perché città"], am.MetricsConfig(rouge_tokenizer="default"))
    assert default["ROUGE-1"][0] == pytest.approx(0.5)  # default tokenizer: "pi citt" vs "perch citt"


def test_metric_values_match_direct_library_calls(results, nltk_data_ready, minilm_path, direct_bert_scorer):
    import sacrebleu
    from nltk.tokenize import wordpunct_tokenize
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    _, oracle, answers, indices = _load(results)
    spec = am.BertScoreSpec(minilm_path, 6, "cli")
    config = am.MetricsConfig(bertscore=spec, n_resamples=500)
    reference = answer_scoring.Reference(results / "Oracle.csv", tuple(oracle), cleaned=False)
    result = answer_scoring.compute_metrics(answers, reference, indices, config)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], tokenizer=am.UnicodeWordTokenizer())
    for strategy_answers in answers:
        name = strategy_answers.strategy
        got = result.per_question[result.per_question["strategy"] == name].set_index("question_index")
        hyps = [strategy_answers.by_index()[i].answer for i in indices]
        refs = [oracle[i] for i in indices]
        p, r, f1 = direct_bert_scorer.score(hyps, refs)
        for k, (i, h, ref) in enumerate(zip(indices, hyps, refs)):
            row = got.loc[i]
            assert row["BLEU"] == pytest.approx(sacrebleu.sentence_bleu(h, [ref]).score, abs=1e-6)
            direct = scorer.score(ref, h)
            for key, col in am.ROUGE_KEYS.items():
                assert row[col] == pytest.approx(direct[key].fmeasure, abs=1e-6)
            assert row["METEOR"] == pytest.approx(
                meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(h)), abs=1e-6)
            assert row["BERTScore P"] == pytest.approx(float(p[k]), abs=1e-6)
            assert row["BERTScore R"] == pytest.approx(float(r[k]), abs=1e-6)
            assert row["BERTScore F1"] == pytest.approx(float(f1[k]), abs=1e-6)
        corpus = result.summary[(result.summary["strategy"] == name) & (result.summary["metric"] == am.CORPUS_BLEU)]
        assert corpus["mean"].iloc[0] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-6)
        means = result.summary[result.summary["strategy"] == name].set_index("metric")["mean"]
        assert means["BERTScore F1"] == pytest.approx(float(f1.mean()), abs=1e-6)
    # identical answer/oracle pairs score perfectly (paragraph's question 0 and the unanswerable question 4)
    para = result.per_question[result.per_question["strategy"] == "paragraph"].set_index("question_index")
    assert para.loc[0, "BLEU"] == pytest.approx(100.0)
    assert para.loc[4, "ROUGE-L"] == pytest.approx(1.0)


def test_cli_writes_tables_and_paired_comparisons(results, nltk_data_ready, minilm_path, capsys):
    out = results / "out"
    code = app.main(["score-answers", "--results-dir", str(results), "--questions", str(results / "Questions.csv"),
                     "--oracle",
                    str(results / "Oracle.csv"), "--out-dir", str(out), "--n-resamples", "400",
                    "--bertscore-model", minilm_path, "--bertscore-layers", "6"])
    assert code == 0
    per_q = pd.read_csv(out / "metrics_per_question.csv")
    summary = pd.read_csv(out / "metrics_summary.csv")
    paired = pd.read_csv(out / "metrics_paired.csv")
    assert len(per_q) == 18 and set(ANSWER_METRICS) <= set(per_q.columns)
    assert len(summary) == 3 * (len(ANSWER_METRICS) + 1)
    assert (summary["ci_low"] <= summary["mean"]).all() and (summary["mean"] <= summary["ci_high"]).all()
    assert len(paired) == 3 * len(ANSWER_METRICS)
    assert paired[["p_wilcoxon", "p_bootstrap", "p_holm"]].apply(lambda c: c.between(0, 1)).all().all()
    md = (out / "metrics_summary.md").read_text(encoding="utf-8")
    assert "| Metric | Paragraph | Fixed-size | Blank-line |" in md
    assert "- paragraph vs fixed-size, BERTScore F1: +" in md
    assert "Questions scored: 6 of 6" in md
    run = json.loads((out / "metrics_run.json").read_text(encoding="utf-8"))
    assert run["bertscore"]["num_layers"] == 6 and run["rouge_tokenizer"] == "unicode"
    assert "Scored 6 of 6 questions" in capsys.readouterr().out


def test_single_strategy_and_cleaned_reference(results, nltk_data_ready):
    for stem in ("DatasetFixedSize", "DatasetNewLine"):
        for ext in ("csv", "json"):
            (results / f"{stem}.{ext}").unlink()
    out = results / "out"
    code = app.main(["score-answers", "--results-dir", str(results), "--questions", str(results / "Questions.csv"),
                     "--oracle",
                    str(results / "Oracle.csv"), "--out-dir", str(out), "--n-resamples", "200", "--clean",
                    "--metrics", "bleu,rouge"])
    assert code == 0
    cleaned = pd.read_csv(results / "Cleaned_Oracle.csv")
    assert cleaned["oracle"].iloc[4] == "contesto fornito contiene risposta"
    md = (out / "metrics_summary.md").read_text(encoding="utf-8")
    assert "only one was found" in md and "Cleaned_Oracle.csv" in md
    assert pd.read_csv(out / "metrics_paired.csv").empty


def test_bertscore_model_follows_profile(tmp_path, minilm_path):
    from ragstudy.e5small import model_folder

    lite = am.resolve_bertscore(None, None, {"profile": "lite"})  # a multilingual encoder: it reads Italian
    assert (lite.model, lite.num_layers) == (str(model_folder()), 10)
    paper = am.resolve_bertscore(None, None, {"profile": "paper"})
    assert paper.model == "distilbert-base-multilingual-cased" and paper.num_layers is None
    with pytest.raises(common.DataError, match="--bertscore-layers"):
        am.resolve_bertscore(minilm_path, None, {})


@pytest.mark.parametrize("script", ["evaluation_metrics.py", "preprocessing_files.py", "interview_analysis.py"])
def test_scripts_run_from_repo_root_with_help(script):
    proc = subprocess.run([sys.executable, f"Postprocessing/{script}", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--results-dir" in proc.stdout


BERTSCORE_IN_A_PROCESS = """
import json, sys
from Postprocessing import answer_metrics as am
hyps, refs, model = json.loads(sys.stdin.read())
config = am.MetricsConfig(bertscore=am.BertScoreSpec(model, 6, "cli"), bertscore_batch_size=3)
print(json.dumps(am.bertscore_scores(hyps, refs, config)))
"""


@pytest.mark.slow
def test_bertscore_is_the_same_to_the_last_bit_whatever_the_process_string_hash(minilm_path, direct_bert_scorer,
                                                                                monkeypatch):
    """Texts with equal word counts (ties in bert-score's batch order, which followed the process's string hash)
    across several batches of 3: two processes with different PYTHONHASHSEED give the same scores to the bit, the
    batch size asked for is the one used, and the scores agree with bert-score's own BERTScorer.score."""
    import bert_score.utils

    hyps = [f"la domanda numero {w} riguarda il protocollo" for w in ("uno", "due", "tre", "quattro", "cinque")]
    hyps += ["risposta breve", "un'altra risposta breve ma diversa"]
    refs = [f"il protocollo {w} si conserva per dieci anni" for w in ("primo", "secondo", "terzo", "quarto", "quinto")]
    refs += ["risposta lunga con molte parole in più", "breve"]
    outputs = []
    for seed in ("3", "4"):  # bert-score's own score gives different last bits under these two
        done = subprocess.run([sys.executable, "-c", BERTSCORE_IN_A_PROCESS], capture_output=True, text=True,
                              input=json.dumps([hyps, refs, minilm_path]), cwd=REPO, timeout=300,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    batches: list[int] = []
    embed = bert_score.utils.get_bert_embedding
    monkeypatch.setattr(bert_score.utils, "get_bert_embedding",
                        lambda texts, *a, **k: (batches.append(len(texts)), embed(texts, *a, **k))[1])
    config = am.MetricsConfig(bertscore=am.BertScoreSpec(minilm_path, 6, "cli"), bertscore_batch_size=3)
    here = am.bertscore_scores(hyps, refs, config)
    assert batches == [3, 3, 3, 3, 2]  # 14 distinct texts, 3 at a time
    p, r, f1 = direct_bert_scorer.score(hyps, refs)
    for name, upstream in zip(am.BERTSCORE, (p, r, f1)):
        assert here[name] == pytest.approx(upstream.tolist(), abs=1e-6)
        assert json.loads(outputs[0])[name] == pytest.approx(upstream.tolist(), abs=1e-6)
