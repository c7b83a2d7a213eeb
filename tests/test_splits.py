"""Every evaluation protocol of the one splits module, for skeletons (subjects) and images (groups)."""
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamcov.errors import ConfigError
from streamcov.splits import folds, holdout, inner_folds
from streamcov.tasks.schema import SplitTable


def run(kind, labels, groups, **kw):
    extra = {k: kw.pop(k) for k in list(kw)
             if k in ("group_names", "subject_names", "store_split", "split_names", "seed")}
    return folds(SplitTable(kind=kind, **kw), labels, groups, **extra)


def test_subject_protocols():
    subjects = np.repeat(np.arange(1, 7), 4)
    labels = np.tile(np.arange(4), 6)
    (name, tr, te), = run("subject-parity", labels, subjects)
    assert name == "odd-even" and set(subjects[tr]) == {1, 3, 5} and set(subjects[te]) == {2, 4, 6}
    (_, tr, te), = run("subjects", labels, subjects, train_subjects=[1, 2], test_subjects=[6])
    assert set(subjects[tr]) == {1, 2} and set(subjects[te]) == {6}
    (_, tr, te), = run("subjects", labels, subjects, train_subjects=[1, 2])
    assert set(subjects[te]) == {3, 4, 5, 6}
    loso = run("leave-one-subject-out", labels, subjects)
    assert [n for n, _, _ in loso] == [f"subject-{s}" for s in range(1, 7)]
    assert all((tr ^ te).all() and set(subjects[te]) == {int(n.split("-")[1])} for n, tr, te in loso)
    assert len(run("leave-one-subject-out", labels, subjects, folds=[0, 5])) == 2


def test_subject_splits_file_and_store_column(tmp_path):
    subjects = np.repeat(np.arange(1, 5), 3)
    labels = np.tile(np.arange(3), 4)
    f = tmp_path / "s.toml"
    f.write_text("[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3, 4]\n"
                 "[[split]]\ntrain_subjects = [3, 4]\ntest_subjects = [1, 2]\n")
    out = run("subject-splits-file", labels, subjects, file=str(f))
    assert [n for n, _, _ in out] == ["split-1", "split-2"]
    assert set(subjects[out[1][1]]) == {3, 4}
    col = np.array([0, 0, 1] * 4, dtype=np.int8)
    (name, tr, te), = run("store", labels, subjects, store_split=col, split_names=["train", "test"])
    assert name == "store" and tr.sum() == 8 and te.sum() == 4


NAMES = ["bd", "bk", "dg", "mm", "tr"]   # HDM05's subjects, numbered 0..4 in sorted order


def test_subjects_by_name_where_the_store_names_them(tmp_path):
    """A store that names its subjects takes them by name (or number) in split.train_subjects / test_subjects and
    in a splits file: the fold is the one their codes give."""
    subjects = np.repeat(np.arange(5), 3)
    labels = np.tile(np.arange(3), 5)
    (_, tr, te), = run("subjects", labels, subjects, train_subjects=["bd", "dg", 4], subject_names=NAMES)
    assert set(subjects[tr]) == {0, 2, 4} and set(subjects[te]) == {1, 3}
    (_, tr, te), = run("subjects", labels, subjects, train_subjects=["mm"], test_subjects=["bk", 0],
                       subject_names=NAMES)
    assert set(subjects[tr]) == {3} and set(subjects[te]) == {0, 1}
    f = tmp_path / "s.toml"
    f.write_text('[[split]]\ntrain_subjects = ["bd", "bk"]\ntest_subjects = ["tr"]\n')
    (_, tr, te), = run("subject-splits-file", labels, subjects, file=str(f), subject_names=NAMES)
    assert set(subjects[tr]) == {0, 1} and set(subjects[te]) == {4}


@pytest.mark.parametrize("kw, msg", [
    ({"train_subjects": ["bd"]},   # a store of numbered subjects
     r"^split\.train_subjects = \[\"bd\"\] gives subjects by name, but the store's subjects are numbers "
     r"\(\[0, 1, 2, 3, 4\]\); give their numbers$"),
    ({"train_subjects": ["bdd", "bk"], "subject_names": NAMES},
     r"^split\.train_subjects = \[\"bdd\", \"bk\"\] names subject\(s\) \[\"bdd\"\] that no row of the store has "
     r"\(did you mean 'bd'\?\) \(its subjects: \[0 \(bd\), 1 \(bk\), 2 \(dg\), 3 \(mm\), 4 \(tr\)\]\)$"),
    ({"train_subjects": ["bd", 0], "subject_names": NAMES},
     r"^split\.train_subjects = \[\"bd\", 0\] names subject\(s\) \[0 \(bd\)\] twice, by number and by name; list "
     r"each subject once$"),
    ({"train_subjects": ["bd"], "test_subjects": [0, 1], "subject_names": NAMES},
     r"^subject\(s\) \[0 \(bd\)\] are in both split\.train_subjects and split\.test_subjects; a subject trains or "
     r"tests, not both$"),
])
def test_subjects_by_name_refused_in_one_line(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        run("subjects", np.tile(np.arange(3), 5), np.repeat(np.arange(5), 3), **kw)


@pytest.mark.parametrize("value, expected", [
    ('[""]', "an integer or a non-empty string"), ("[true]", "an integer or a quoted string"),
    ("[1.5]", "an integer or a quoted string")])
def test_subject_values_are_numbers_or_names(value, expected):
    """A subject is a number or a name: anything else is refused in one line naming the entry."""
    import re

    from cli_cases import assert_one_line_error, cli
    from conftest import REPO

    given = f'split={{kind="subjects", train_subjects={value}}}'
    rc, err, _ = cli("run", REPO / "pipelines" / "msr_action3d.toml", "--set", given)
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set {re.escape(given)}: split\.train_subjects\.0 = "
                                   rf"{re.escape(value[1:-1])}: expected {expected}$")


@pytest.mark.parametrize("text, msg", [
    ("[[split]]\ntrain_subjects = [true]\ntest_subjects = [3]\n",   # true was read as subject 1
     r"\[\[split\]\] number 1: train_subjects = \[true\]: expected a non-empty list of subject numbers"),
    ("[[split]]\ntrain_subjects = [1, 1, 2]\ntest_subjects = [3]\n",
     r"\[\[split\]\] number 1: train_subjects names subject\(s\) \[1\] more than once; list each subject once"),
    ("[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3]\n[[split]]\ntrain_subjects = [2, 1]\n"
     "test_subjects = [3]\n",                                          # run as two folds and averaged
     r"\[\[split\]\] number 2 is the same split as number 1; remove one of them"),
    # keys a splits file does not read: ignored (an extra list), or a typo named only as a missing key
    ("[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3]\n\n[[split]]\ntrain_subjects = [1, 3]\n"
     "test_subject = [2]\n",
     r"s\.toml, line 7: \[\[split\]\] number 2: unknown key 'test_subject' \(did you mean 'test_subjects'\?\); a "
     r"splits file holds \[\[split\]\] tables of train_subjects and test_subjects$"),
    ("[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3]\nvalidation_subjects = [4]\n",
     r"s\.toml, line 4: \[\[split\]\] number 1: unknown key 'validation_subjects'"),
    ("extra = 1\n[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3]\n",
     r"s\.toml, line 1: unknown key 'extra'; a splits file holds"),
])
def test_subject_splits_file_slips(tmp_path, text, msg):
    subjects = np.repeat(np.arange(1, 5), 3)
    f = tmp_path / "s.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        run("subject-splits-file", np.tile(np.arange(3), 4), subjects, file=str(f))


def test_subject_splits_file_with_a_bom(tmp_path):
    """Saved by an editor that writes a byte-order mark: read (it was 'invalid statement' at line 1)."""
    subjects = np.repeat(np.arange(1, 5), 3)
    f = tmp_path / "s.toml"
    f.write_bytes(b"\xef\xbb\xbf[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [3, 4]\n")
    (name, tr, te), = run("subject-splits-file", np.tile(np.arange(3), 4), subjects, file=str(f))
    assert set(subjects[tr]) == {1, 2} and set(subjects[te]) == {3, 4}


@pytest.mark.parametrize("data, reason", [
    (b"[[split]]\n# Jos\xe9\ntrain_subjects = [1, 2]\ntest_subjects = [3, 4]\n",
     r"invalid continuation byte at byte 15"),   # the 0-based offset of the Latin-1 e acute
    (b"\xff\xfe[\x00[\x00", r"invalid start byte at byte 0"),   # saved as UTF-16
])
def test_a_splits_file_that_is_not_utf8_is_refused(tmp_path, data, reason):
    """A splits file saved in Latin-1 (a comment with an accent) or UTF-16: one line naming the file and the
    byte, not a UnicodeDecodeError."""
    subjects = np.repeat(np.arange(1, 5), 3)
    f = tmp_path / "s.toml"
    f.write_bytes(data)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}: not a UTF-8 text file \({reason}\)$"):
        run("subject-splits-file", np.tile(np.arange(3), 4), subjects, file=str(f))


def test_image_protocols():
    y = np.repeat(np.arange(3), 12)
    groups = np.repeat(np.arange(12), 3)
    gnames = [f"{c}/{k}" for c in range(3) for k in range(1, 5)]   # 4 objects per class
    s = run("stratified-kfold", y, groups, n_splits=4)
    assert len(s) == 4
    for _, tr, te in s:
        assert not (tr & te).any() and (tr | te).all()
        assert np.all(np.bincount(y[te]) == 3)
    s = run("per-class", y, groups, n_train=5, n_test=4, n_repeats=3)
    assert len(s) == 3 and all(np.all(np.bincount(y[tr]) == 5) and np.all(np.bincount(y[te]) == 4)
                               for _, tr, te in s)
    assert not np.array_equal(s[0][1], s[1][1])
    s = run("per-class", y, groups, n_train=10)
    assert all(te.sum() == 6 for _, _, te in s)
    s = run("leave-objects-out", y, groups, group_names=gnames)
    assert [n for n, _, _ in s] == ["object-1", "object-2", "object-3", "object-4"]
    for _, tr, te in s:   # one object of every class per fold
        assert te.sum() == 9 and np.all(np.bincount(y[te]) == 3)
    s = run("group-kfold", y, groups, n_splits=3, folds=[0, 1])
    assert len(s) == 2 and all(not set(groups[tr]) & set(groups[te]) for _, tr, te in s)
    # the seed of the pipeline is the default; the table's own seed wins
    a = run("stratified-kfold", y, groups, n_splits=3, seed=1)
    b = run("stratified-kfold", y, groups, n_splits=3, seed=2)
    c = folds(SplitTable(kind="stratified-kfold", n_splits=3, seed=1), y, groups, seed=2)
    assert not np.array_equal(a[0][2], b[0][2]) and np.array_equal(a[0][2], c[0][2])


@pytest.mark.parametrize("kind, kw, msg", [
    # the keys as typed lead the line (where they were given goes in front of it), then how far to lower them
    ("per-class", {"n_train": 12}, r"^split\.n_train = 12: class 0 has 12 rows; the protocol needs 13 of every class "
                                   r"\(12 train \+ >= 1 test\); lower split\.n_train to 11 or less$"),
    ("per-class", {"n_train": 8, "n_test": 5}, r"^split\.n_train = 8, split\.n_test = 5: class 0 has 12 rows; the "
                                               r"protocol needs 13 of every class \(8 train \+ 5 test\); lower "
                                               r"split\.n_train or split\.n_test so that together they are 12 or "
                                               r"less$"),
    ("stratified-kfold", {"n_splits": 13}, "split.n_splits = 13 but class 0 has only 12 rows"),
    ("leave-objects-out", {}, r"needs named groups \(ingest with group_level=2, or data.group_level = 2 in a "
                              r"pipeline, so that the group is <class>/<object>\)$"),
    ("group-kfold", {"n_splits": 20}, "split.n_splits = 20 but there are only 12 groups"),
    ("subject-parity", {"folds": [1]}, r"split.folds = \[1\]: the protocol has 1 folds"),
    ("store", {}, r"split.kind = 'store' reads the train/test split recorded in the store, which records none; "
                  r"add a split column"),
    ("subject-splits-file", {"file": "/nonexistent.toml"}, r'split.file = "/nonexistent.toml": not found'),
])
def test_protocol_errors(kind, kw, msg):
    y = np.repeat(np.arange(3), 12)
    groups = np.repeat(np.arange(12), 3)
    with pytest.raises(ConfigError, match=msg):
        run(kind, y, groups, **kw)


def test_per_class_names_the_smallest_class():
    """The class short of rows is the smallest one, whatever its code; one row cannot be split at all."""
    y = np.repeat(np.arange(3), [12, 4, 9])
    groups = np.arange(len(y))
    with pytest.raises(ConfigError, match=r"^split\.n_train = 5: class 'b' has 4 rows; the protocol needs 6 of "
                                          r"every class \(5 train \+ >= 1 test\); lower split\.n_train to 3 or less$"):
        folds({"kind": "per-class", "n_train": 5}, y, groups, label_names=["a", "b", "c"])
    y = np.repeat(np.arange(2), [5, 1])
    with pytest.raises(ConfigError, match=r"^split\.n_train = 1: class 1 has 1 rows; .*; a class needs at least 2 rows "
                                          r"\(1 train \+ 1 test\): give it more rows or choose another split\.kind$"):
        folds({"kind": "per-class", "n_train": 1}, y, np.arange(6))


def test_the_group_level_hint_names_the_route_in_use():
    """From Python the hint names ingest_images' keyword, in the command the ingestion's flag; the pipeline
    key beside it either way (a pipeline reaches the same ingestion through data.group_level)."""
    from streamcov.errors import command_line

    y, groups = np.repeat(np.arange(3), 4), np.arange(12)
    names = [f"g{i}" for i in range(12)]
    with pytest.raises(ConfigError, match=r"groups are \['g0', 'g1', 'g10'\]\.\.\.: ingest the images with "
                                          r"group_level=2, or data.group_level = 2 in a pipeline$"):
        folds(SplitTable(kind="leave-objects-out"), y, groups, group_names=names)
    with command_line(), pytest.raises(ConfigError, match=r"ingest the images with --group-level 2, or "
                                                          r"data.group_level = 2 in a pipeline$"):
        folds(SplitTable(kind="leave-objects-out"), y, groups, group_names=names)


def test_a_fold_without_test_rows_is_refused():
    subjects = np.array([1, 1, 3, 3, 5])
    with pytest.raises(ConfigError, match=r"fold 'odd-even' has 5 training and 0 test rows; .* \(split.kind = "
                                          r"'subject-parity' trains on odd subject numbers and tests on even ones; "
                                          r"the store's subjects: \[1, 3, 5\]\)"):
        run("subject-parity", np.zeros(5, int), subjects)
    with pytest.raises(ConfigError, match=r"fold 'subject-1' has 0 training and 5 test rows; .* \(split.kind = "
                                          r"'leave-one-subject-out' tests each subject in turn; the store has 1 "
                                          r"subject\(s\)\)"):
        run("leave-one-subject-out", np.zeros(5, int), np.ones(5, int))


def test_store_split_values_are_read_without_case_and_spaces():
    y = np.repeat([0, 1], 4)
    split = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    (name, tr, te), = folds(SplitTable(kind="store"), y, np.arange(8), store_split=split,
                            split_names=["Test ", "TRAIN"])
    assert name == "store" and np.array_equal(tr, split == 1) and np.array_equal(te, split == 0)
    with pytest.raises(ConfigError, match=r"needs the store's split values train and test, but they are "
                                          r"\['training', 'testing'\]; write train and test in the split column"):
        folds(SplitTable(kind="store"), y, np.arange(8), store_split=split, split_names=["training", "testing"])


def test_schema_requirements():
    with pytest.raises(ValueError, match="needs split.train_subjects"):
        SplitTable(kind="subjects")
    with pytest.raises(ValueError, match="needs split.file"):
        SplitTable(kind="subject-splits-file")
    with pytest.raises(ValueError, match="needs split.n_train"):
        SplitTable(kind="per-class")


def test_inner_folds():
    y = np.repeat(np.arange(3), 6)
    g = np.tile(np.arange(3), 6)
    logo = inner_folds(y, g)
    assert len(logo) == 3 and all(len(set(g[te])) == 1 for _, te in logo)
    skf = inner_folds(y, n_splits=10)       # at most the smallest class size: 6
    assert len(skf) == 6
    with pytest.raises(ConfigError, match="at least 2 training subjects"):
        inner_folds(y, np.zeros(18, int))
    with pytest.raises(ConfigError, match="at least 2 training images"):
        inner_folds(np.array([0, 1, 1]), n_splits=3)
    # any class labels, as scikit-learn takes them (np.bincount refused strings and floats with a casting TypeError,
    # and negative codes); the folds of codes are those of the labels they stand for
    words = np.array(["run", "jump", "sit"])[y]
    assert [(list(a), list(b)) for a, b in inner_folds(words, n_splits=3)] == \
        [(list(a), list(b)) for a, b in inner_folds(np.array([1, 0, 2])[y], n_splits=3)]
    assert len(inner_folds(y + 0.0, n_splits=3)) == 3
    with pytest.raises(ConfigError, match=r"class 'sit' has 1 in a fold's training images"):
        inner_folds(np.array(["run", "run", "sit"]), n_splits=2)
    for bad in (0, 1, 2.0, True):
        with pytest.raises(ValueError, match=r"n_splits: expected an integer >= 2 \(folds of a cross-validation\)"):
            inner_folds(y, n_splits=bad)
    for bad in (np.array([], dtype=int), np.zeros((3, 2), int)):
        with pytest.raises(ValueError, match=r"labels: expected one label per row \(a non-empty 1-D array\)"):
            inner_folds(bad)


def test_inner_folds_of_whole_groups_keep_each_group_on_one_side_and_every_class_in_each_fold():
    """group_folds: the inner folds of a protocol that keeps groups apart (objects: leave-objects-out) hold each
    group's rows on one side, stratified by class; as many folds as the class with fewest groups allows."""
    from streamcov.splits import GROUPED_KINDS, groups_to_keep, inner_fold_count, keeps_groups_apart

    y = np.repeat(np.arange(4), 30)                       # 4 classes x 6 objects x 5 views
    objects = np.repeat(np.arange(24), 5)
    for k in (2, 3, 6):
        got = inner_folds(y, objects, n_splits=k, seed=1, group_folds=True)
        assert len(got) == k
        for a, b in got:
            assert not set(objects[a]) & set(objects[b])
            assert set(y[b]) == set(range(4))             # every class in every validation fold
        assert sorted(np.concatenate([b for _, b in got]).tolist()) == list(range(len(y)))
    assert len(inner_folds(y, objects, n_splits=10, group_folds=True)) == 6 == inner_fold_count(y, 10, objects)
    assert inner_fold_count(y, 10) == 10                  # folds of rows: 30 rows a class
    # a class of one group (leave-objects-out on 2 objects a class): folds of rows, as without groups
    one = np.where(y == 0, 0, objects)
    assert groups_to_keep(y, one) is None and groups_to_keep(y, objects) is objects
    assert [(list(a), list(b)) for a, b in inner_folds(y, one, n_splits=3, seed=1, group_folds=True)] == \
        [(list(a), list(b)) for a, b in inner_folds(y, n_splits=3, seed=1)]
    assert keeps_groups_apart({"kind": "leave-objects-out"}) and not keeps_groups_apart({"kind": "stratified-kfold"})
    assert not keeps_groups_apart(SplitTable(kind="stratified-kfold")) and "group-kfold" in GROUPED_KINDS


def test_one_class_training_and_unseen_test_classes():
    from streamcov.splits import fold_warnings

    y = np.array([0, 0, 1, 1, 2, 2])
    subjects = np.array([1, 1, 2, 2, 1, 2])
    with pytest.raises(ConfigError, match=r"the training rows of fold 'subjects' hold one class \('a'\)"):
        folds(SplitTable(kind="subjects", train_subjects=[1], test_subjects=[2]), np.array([0, 0, 1, 1, 0, 1]),
              subjects, label_names=["a", "b"])
    out = folds(SplitTable(kind="subjects", train_subjects=[1]), np.array([0, 0, 1, 1, 1, 2]),
                np.array([1, 1, 1, 2, 2, 2]), label_names=["a", "b", "c"])
    assert fold_warnings(out, np.array([0, 0, 1, 1, 1, 2]), ["a", "b", "c"]) == [
        "fold 'subjects': 1 test rows of class(es) ['c'] that no training row has; they are counted as errors"]
    assert fold_warnings(run("subject-parity", y, np.array([1, 2, 1, 2, 1, 2])), y) == []
    # subjects that no fold names (a splits file written for subjects 1..10 on a store of 12): said
    g = np.array([1, 2, 3, 1, 2, 3, 1, 2])
    y8 = np.array([0, 1, 0, 1, 0, 1, 1, 0])
    out = folds(SplitTable(kind="subjects", train_subjects=[1], test_subjects=[2]), y8, g)
    assert fold_warnings(out, y8, groups=g) == [
        "2 rows are in no fold's training or test rows: the protocol does not use them (every row of subject(s) [3])"]


# ------------------------------------------------------- early-stopping hold-out
def _holdout_counts(labels, fraction, seed=0):
    labels = np.asarray(labels)
    train = np.ones(len(labels), bool)
    fit, val = holdout(labels, train, fraction, np.random.default_rng(seed))
    return fit, val, {c: (int(fit[labels == c].sum()), int(val[labels == c].sum())) for c in np.unique(labels)}


def test_holdout_is_stratified_and_keeps_small_classes():
    """A class of 2 rows among 98 of another: a plain random draw of half the rows holds out both of its rows
    in about a quarter of the draws, and the learner never fits that class; the hold-out gives each class its
    share (1 of 2, 49 of 98) and keeps a row of each to fit on, whatever the seed."""
    labels = np.array([0] * 98 + [1] * 2)
    for seed in range(20):
        fit, val, counts = _holdout_counts(labels, 0.5, seed)
        assert counts == {0: (49, 49), 1: (1, 1)}
        assert not (fit & val).any() and (fit | val).all()


def test_holdout_only_draws_from_training_rows_and_is_reproducible():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 200)
    train = rng.random(200) < 0.6
    fit, val = holdout(labels, train, 0.25, np.random.default_rng(7))
    again = holdout(labels, train, 0.25, np.random.default_rng(7))
    assert (fit == again[0]).all() and (val == again[1]).all()
    assert not (val & ~train).any() and ((fit | val) == train).all()
    assert val.sum() == round(0.25 * train.sum())
    fit0, val0 = holdout(labels, train, 0.0, np.random.default_rng(7))
    assert (fit0 == train).all() and not val0.any()


def test_holdout_singletons_stay_to_fit_while_others_can_give():
    """Classes of one row keep it; the held-out rows come from the classes with rows to spare. A share that
    would leave some class no row to fit on is refused (it held out the whole largest class)."""
    labels = np.array(list(range(5)) + [9] * 5)                    # five singletons, one class of 5
    _, val, counts = _holdout_counts(labels, 0.4)
    assert val.sum() == 4 and counts[9] == (1, 4) and all(counts[c] == (1, 0) for c in range(5))
    with pytest.raises(ConfigError, match=r"^validation_fraction = 0\.6 holds out 6 of the 10 training rows, which "
                                          r"leaves fewer rows to fit on than the 6 classes \(each needs one\); "
                                          r"lower it$"):
        _holdout_counts(labels, 0.6)                               # 6 > the 4 rows to spare


def test_holdout_refuses_a_share_that_leaves_nothing():
    with pytest.raises(ValueError, match=r"validation_fraction = 0\.99 leaves no training row of 10"):
        holdout(np.arange(10) % 2, np.ones(10, bool), 0.99, np.random.default_rng(0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=60), st.floats(0.01, 0.9), st.integers(0, 2**31))
def test_holdout_size_and_shares(labels, fraction, seed):
    """The size is ``max(1, round(fraction n))`` exactly (or refused where some class would keep no row); each
    class keeps a row, and a class holds out its share ``fraction n_c`` to within one row (largest remainders)
    unless it had to keep its last row or give for a class that did."""
    labels = np.asarray(labels)
    n = len(labels)
    n_val = max(1, int(round(fraction * n)))
    classes, sizes = np.unique(labels, return_counts=True)
    assume(n_val < n)
    if n_val > n - len(classes):
        with pytest.raises(ConfigError, match="fewer rows to fit on than the"):
            _holdout_counts(labels, fraction, seed)
        return
    fit, val, counts = _holdout_counts(labels, fraction, seed)
    assert val.sum() == n_val and not (fit & val).any() and (fit | val).all()
    assert all(counts[c][0] >= 1 for c in classes)
    if all(np.ceil(n_val * s / n) <= s - 1 for s in sizes):
        for c, s in zip(classes, sizes):
            assert abs(counts[c][1] - n_val * s / n) < 1


@pytest.mark.parametrize("given, said", [
    ('split={kind="subjects", train_subjects=["bd", 1], test_subjects=["bd", 1]}',
     r'subjects \["bd", 1\] are in both split\.train_subjects and split\.test_subjects; a subject trains or tests, '
     r'not both$'),
    ('split={kind="subjects", train_subjects=["bd", "bd", 1, 1]}',
     r'split\.train_subjects = \["bd", "bd", 1, 1\] names subject\(s\) \["bd", 1\] more than once; list each subject '
     r'once$')])
def test_names_and_numbers_mixed_are_refused_in_one_line(given, said):
    """Names and numbers in one list cannot be sorted: the checks of a subject listed twice or on both sides
    ended in a TypeError traceback ("internal error")."""
    import re

    from cli_cases import assert_one_line_error, cli
    from conftest import REPO

    rc, err, _ = cli("run", REPO / "pipelines" / "msr_action3d.toml", "--set", given)
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set {re.escape(given)}: {said}")


def test_a_splits_file_naming_one_subject_twice_says_only_that(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[[split]]\ntrain_subjects = ["bd", 0]\ntest_subjects = ["tr"]\n')
    with pytest.raises(ConfigError, match=r"train_subjects names subject\(s\) \[0 \(bd\)\] twice, by number and by "
                                          r"name; list each subject once$"):
        run("subject-splits-file", np.tile(np.arange(3), 5), np.repeat(np.arange(5), 3), file=str(f),
            subject_names=NAMES)
