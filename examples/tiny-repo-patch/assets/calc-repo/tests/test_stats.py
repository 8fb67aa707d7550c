import pytest
from calc import mean, median, mode, variance


def test_mean_of_integers():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_rejects_an_empty_sequence():
    with pytest.raises(ValueError):
        mean([])


def test_median_of_an_odd_count_is_the_middle_value():
    assert median([7, 1, 3]) == 3


def test_median_rejects_an_empty_sequence():
    with pytest.raises(ValueError):
        median([])


def test_variance_of_identical_values_is_zero():
    assert variance([4, 4, 4]) == 0


def test_variance_needs_two_values():
    with pytest.raises(ValueError):
        variance([1])


def test_mode_of_a_clear_winner():
    assert mode([3, 1, 3, 2]) == 3


def test_mode_rejects_an_empty_sequence():
    with pytest.raises(ValueError):
        mode([])
