"""Containers whose own lines (border, titles, background) are drawn again only when they change."""

from __future__ import annotations

from typing import TypeVar

from textual.containers import Horizontal
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Footer
from textual.widget import Widget

Box = TypeVar("Box", bound="CachedBox")


class CachedBox(Widget):
    """A widget whose lines Textual's styles cache draws, given again as they were while nothing they depend on changed.

    The compositor renders, each frame, every widget that overlaps the frame's changed area (the box around all
    changed lines: most of the screen once a second), containers too, though their own lines stay hidden behind
    their children's and change only with their size, their titles, their styles (a class of them or an ancestor,
    the theme: ``notify_style_update``) or a ``refresh`` of their own (frame_cost.py: a workload panel cost ~200 µs a
    frame this way). Those are what the lines are kept against."""

    _kept: tuple[tuple[object, ...], list[Strip]] | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        key: tuple[object, ...] = (crop, self.outer_size, self._border_title, self._border_subtitle)
        key += tuple(self.get_line_filters())
        if self._kept is not None and self._kept[0] == key:
            return self._kept[1]
        lines = super().render_lines(crop)
        self._kept = (key, lines)
        return lines

    def refresh(
        self: Box,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Box:
        self._kept = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def notify_style_update(self) -> None:
        self._kept = None
        super().notify_style_update()


class Row(Horizontal, CachedBox):
    """A ``Horizontal`` whose own lines are kept (``Horizontal`` first: Textual's CSS follows the first base)."""


class Keys(Footer, CachedBox):
    """A ``Footer`` whose own lines are kept (the keys are its children: their lines are theirs)."""
