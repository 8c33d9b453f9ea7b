"""Phoneme → viseme mapping (pure logic)."""

from livehost.voice.visemes import VISEMES, phoneme_visemes, visemes_from_phonemes


def test_basic_mapping():
    assert phoneme_visemes("p") == ["PP"]
    assert phoneme_visemes("ˈæ") == ["aa"]  # stress mark ignored
    assert phoneme_visemes("iː") == ["ih"]  # length mark ignored
    assert phoneme_visemes("dʒ") == ["CH"]
    assert phoneme_visemes("oʊ") == ["oh", "ou"]  # diphthong: two shapes
    assert phoneme_visemes(".") == ["sil"] and phoneme_visemes("_") == ["sil"]
    assert phoneme_visemes(" ") is None and phoneme_visemes("ˈ") is None


def test_all_mapped_visemes_are_in_the_set():
    from livehost.voice.visemes import PHONEME_TO_VISEME

    assert set(PHONEME_TO_VISEME.values()) <= set(VISEMES)
    assert len(VISEMES) == 15


def test_timeline_rules():
    # piper-style stream: one symbol per item, affricate split in two
    ph = [
        ("^", 0.0, 0.05),
        ("d", 0.05, 0.1),
        ("ʒ", 0.1, 0.15),
        ("ˈ", 0.15, 0.16),
        ("æ", 0.16, 0.3),
        ("m", 0.3, 0.4),
        ("m", 0.4, 0.45),
        (" ", 0.45, 0.5),
        ("!", 0.5, 0.6),
        ("$", 0.6, 0.7),
    ]
    tl = visemes_from_phonemes(ph, duration_s=0.65)
    assert tl == [(0.0, "sil"), (50.0, "CH"), (160.0, "aa"), (300.0, "PP"), (500.0, "sil")]


def test_timeline_clamped_to_duration_and_unsorted_input():
    ph = [("a", 0.2, 0.4), ("p", 0.0, 0.2), ("s", 0.4, 9.0)]
    tl = visemes_from_phonemes(ph, duration_s=0.5)
    times = [t for t, _ in tl]
    assert times == sorted(times) and times[-1] <= 500.0
    assert tl[-1][1] == "sil"
