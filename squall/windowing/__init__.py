"""Windowed bolts: Storm's sliding and tumbling windows, by count or time,
in processing time or event time with watermarks.

    from squall.windowing import WindowedBolt, Count, Duration
"""

from squall.windowing.bolt import LATE_TUPLE_FIELD, WindowedBolt
from squall.windowing.core import Activation, WatermarkTracker, Window, WindowCore
from squall.windowing.policy import Count, Duration, WindowPolicy

__all__ = ["LATE_TUPLE_FIELD", "Activation", "Count", "Duration", "WatermarkTracker", "Window",
           "WindowCore", "WindowPolicy", "WindowedBolt"]
