"""Timetables registered with Airflow by the `airflow_iqp` plugin."""

from __future__ import annotations

from airflow_iqp.timetables.window import WindowTimetable

__all__ = ["WindowTimetable"]
