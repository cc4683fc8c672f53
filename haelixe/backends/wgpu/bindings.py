"""Explicit bind group layouts and a cache of bind groups, so a dispatch that binds the
same buffers as an earlier one (the same op in the next training step, whose buffers the
allocator hands out again) creates nothing.

Binding 0 (the metadata) is declared with a dynamic offset: a bind group names the
metadata buffer once and each dispatch passes its window's offset when it binds the
group. The key of a cached group is therefore its layout and its buffers only. A buffer's
groups are dropped before the buffer is destroyed (:meth:`BindGroupCache.forget`).
"""

from __future__ import annotations

from collections import OrderedDict

#: buffer binding type per access mode of ``shaders.Binding``
_BUFFER_TYPE = {"read": "read-only-storage", "write": "storage", "rw": "storage",
                "write_words": "storage", "rw_words": "storage",
                "atomic_add": "storage", "atomic_mul": "storage", "atomic_max": "storage",
                "atomic_min": "storage"}


def layout_entries(bindings, meta_window_bytes: int) -> list:
    """Bind group layout entries: the metadata window, then one per kernel binding."""
    import wgpu

    compute = wgpu.ShaderStage.COMPUTE
    entries = [{"binding": 0, "visibility": compute,
                "buffer": {"type": "read-only-storage", "has_dynamic_offset": True,
                           "min_binding_size": meta_window_bytes}}]
    for slot, b in enumerate(bindings, start=1):
        entries.append({"binding": slot, "visibility": compute,
                        "buffer": {"type": _BUFFER_TYPE[b.access]}})
    return entries


class BindGroupCache:
    """Least-recently-used bind groups keyed by (layout, buffers)."""

    def __init__(self, device, meta_buffer, meta_window_bytes: int, counters=None,
                 capacity: int = 4096):
        self.device = device
        #: a dict whose "bind_groups" counts the groups made (the dispatcher's counters)
        self.counters = {"bind_groups": 0} if counters is None else counters
        self.meta_buffer = meta_buffer
        self.window = meta_window_bytes
        self.capacity = capacity
        self._groups: OrderedDict = OrderedDict()  # key -> (group, buffers)
        self._keys_of: dict[int, set] = {}  # id(buffer) -> keys naming it
        self.created = 0

    def get(self, layout, buffers):
        """The bind group of ``layout`` over ``buffers`` (bindings 1..), made once."""
        key = (id(layout), *map(id, buffers))
        hit = self._groups.get(key)
        if hit is not None:
            self._groups.move_to_end(key)
            return hit[0]
        entries = [{"binding": 0, "resource": {
            "buffer": self.meta_buffer, "offset": 0, "size": self.window}}]
        for slot, buf in enumerate(buffers, start=1):
            entries.append({"binding": slot, "resource": {
                "buffer": buf, "offset": 0, "size": buf.size}})
        group = self.device.create_bind_group(layout=layout, entries=entries)
        self.created += 1
        self.counters["bind_groups"] += 1
        # the value holds the layout and buffers: their ids cannot be reused meanwhile
        self._groups[key] = (group, (layout, *buffers))
        for buf in buffers:
            self._keys_of.setdefault(id(buf), set()).add(key)
        if len(self._groups) > self.capacity:
            self._drop(next(iter(self._groups)))
        return group

    def forget(self, buffer) -> None:
        """Drop every group that binds ``buffer`` (call before destroying it)."""
        for key in self._keys_of.pop(id(buffer), ()):
            self._drop(key)

    def _drop(self, key) -> None:
        entry = self._groups.pop(key, None)
        if entry is None:
            return
        for buf in entry[1][1:]:
            keys = self._keys_of.get(id(buf))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys_of[id(buf)]

    def __len__(self) -> int:
        return len(self._groups)
