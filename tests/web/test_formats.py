"""The one time and number style (twin/pages/formats.py) and the clock that dates simulated
instants (twin/pages/clock.py)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from twin.pages import formats
from twin.pages.clock import SimClock


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (45, "45 s"), (59.4, "59 s"), (60, "1 min"), (14 * 60, "14 min"),
    (3599.9, "1 h"), (2 * 3600 + 14 * 60, "2 h 14 min"), (71.46 * 3600, "2 d 23 h"),
    (86400, "1 d"), (23064, "6 h 24 min"), (None, "–"), (float("nan"), "–"), (-90, "-2 min")])
def test_durations_read_as_hours_and_minutes(seconds, text):
    assert formats.duration(seconds) == text


def test_hours_and_fractions_and_counts():
    assert formats.duration_h(0.5) == "30 min"
    assert formats.percent(0.3646) == "36.46 %" and formats.percent(1, 0) == "100 %"
    assert formats.thousands(4096) == "4,096" and formats.thousands(101120) == "101,120"
    assert formats.thousands(1234.567, 1) == "1,234.6" and formats.thousands(None) == "–"


def test_simulated_time_is_a_day_and_a_clock():
    assert formats.sim_time(268980.691) == "day 3, 02:43"
    assert formats.sim_time(0) == "day 0, 00:00"


def test_the_clock_interpolates_between_known_instants_and_runs_at_speed_outside():
    w0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    # a warm start: 3 simulated days recorded within 10 wall seconds, then speed 60
    clock = SimClock([(0.0, w0), (259200.0, w0 + timedelta(seconds=10)),
                      (259200.0 + 3600.0, w0 + timedelta(seconds=70))], speed=60.0)
    assert clock.wall(129600.0) == w0 + timedelta(seconds=5)
    assert clock.wall(259200.0 + 1800.0) == w0 + timedelta(seconds=40)
    assert clock.wall(259200.0 + 3600.0 + 600.0) == w0 + timedelta(seconds=80)
    assert clock.wall(-600.0) == w0 - timedelta(seconds=10)
    assert SimClock([], 60.0).wall(5.0) is None


def test_the_template_filters_write_the_same_style():
    clock = SimClock([(3600.0, datetime(2025, 6, 1, 12, 0, tzinfo=UTC))], speed=1.0)
    out = Template("{% load twin_format %}{{ s|duration }}|{{ f|percent }}|{{ n|thousands }}|"
                   "{{ t|when:clock }}|{{ t|when }}").render(Context(
                       {"s": 8040, "f": 0.3646, "n": 4096, "t": 3540.0, "clock": clock}))
    assert out.split("|")[:3] == ["2 h 14 min", "36.46 %", "4,096"]
    assert ('<time class="wall" datetime="2025-06-01T11:59:00+00:00" '
            'title="2025-06-01T11:59:00+00:00 · simulated day 0, 00:59">2025-06-01 11:59:00</time>'
            in out)
    assert out.endswith('<span class="sim-time">day 0, 00:59</span>')
