"""Headless Chromium's WebGPU (Tint, on the SwiftShader adapter) as a second WGSL
compiler and a second device for the portability test (test_wgsl_portable.py).

Chromium serves WebGPU only to secure contexts, so the page comes from a local HTTP
server on 127.0.0.1; the SwiftShader adapter needs no GPU and no network."""

from __future__ import annotations

import http.server
import shutil
import threading
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = "chromium is not installed (apt-get install chromium); .ci/run installs it"
ARGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

_DEVICE_JS = """async () => {
  if (!navigator.gpu) return {error: 'navigator.gpu is missing'};
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return {error: 'no WebGPU adapter'};
  const wanted = ['subgroups', 'shader-f16'].filter(f => adapter.features.has(f));
  window.hxDevice = await adapter.requestDevice({requiredFeatures: wanted,
      requiredLimits: {maxComputeWorkgroupStorageSize:
                         adapter.limits.maxComputeWorkgroupStorageSize,
                       maxComputeInvocationsPerWorkgroup:
                         adapter.limits.maxComputeInvocationsPerWorkgroup,
                       maxComputeWorkgroupSizeX: adapter.limits.maxComputeWorkgroupSizeX,
                       maxStorageBuffersPerShaderStage:
                         adapter.limits.maxStorageBuffersPerShaderStage}});
  return {features: wanted, adapter: adapter.info.architecture || adapter.info.vendor};
}"""

_COMPILE_JS = """async (sources) => {
  const out = [];
  for (const code of sources) {
    const module = hxDevice.createShaderModule({code});
    const info = await module.getCompilationInfo();
    out.push(info.messages.filter(m => m.type === 'error')
                          .map(m => `${m.lineNum}:${m.linePos}: ${m.message}`));
  }
  return out;
}"""


# Runs a recorded op (wgsl_workload.record_cases): its buffers made with their recorded
# bytes, its kernels dispatched in order, each with its metadata in a buffer of its own;
# returns the result's buffer as float32 values, or the first error WebGPU raised.
_RUN_JS = """async (c) => {
  const dev = hxDevice;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  dev.pushErrorScope('validation');
  const bufs = c.buffers.map(b64 => {
    const bytes = Uint8Array.from(atob(b64), ch => ch.charCodeAt(0));
    const buf = dev.createBuffer({size: Math.max(16, Math.ceil(bytes.length / 4) * 4), usage});
    dev.queue.writeBuffer(buf, 0, bytes);
    return buf;
  });
  for (const k of c.kernels) {
    const module = dev.createShaderModule({code: k.source});
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter(m => m.type === 'error');
    if (errors.length) return {error: `${k.name}: ${errors[0].message}`};
    const entries = [{binding: 0, visibility: GPUShaderStage.COMPUTE,
                      buffer: {type: 'read-only-storage'}}];
    k.access.forEach((a, i) => entries.push({binding: i + 1, visibility: GPUShaderStage.COMPUTE,
        buffer: {type: a === 'read' ? 'read-only-storage' : 'storage'}}));
    const layout = dev.createBindGroupLayout({entries});
    const pipeline = dev.createComputePipeline({
        layout: dev.createPipelineLayout({bindGroupLayouts: [layout]}),
        compute: {module, entryPoint: k.entry}});
    const meta = new Int32Array(c.meta_ints);
    meta.set(k.meta);
    const metaBuf = dev.createBuffer({size: meta.byteLength, usage});
    dev.queue.writeBuffer(metaBuf, 0, meta);
    const group = dev.createBindGroup({layout, entries: [{binding: 0, resource: {buffer: metaBuf}},
        ...k.buffers.map((b, i) => ({binding: i + 1, resource: {buffer: bufs[b]}}))]});
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(...k.grid);
    pass.end();
    dev.queue.submit([enc.finish()]);
  }
  const res = bufs[c.result];
  const read = dev.createBuffer({size: res.size,
                                 usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
  const enc = dev.createCommandEncoder();
  enc.copyBufferToBuffer(res, 0, read, 0, res.size);
  dev.queue.submit([enc.finish()]);
  const err = await dev.popErrorScope();
  if (err) return {error: err.message};
  await read.mapAsync(GPUMapMode.READ);
  const values = Array.from(new Float32Array(read.getMappedRange()));
  read.unmap();
  return {values};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the handler's API)
        body = b"<!doctype html><title>webgpu</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class WebGPUPage:
    """A page holding a WebGPU device (``window.hxDevice``)."""

    def __init__(self, page, info):
        self.page, self.features, self.adapter = page, info["features"], info["adapter"]

    def compile(self, sources: list[str]) -> list[list[str]]:
        """Tint's error messages for each WGSL source (an empty list: it compiled)."""
        return self.page.evaluate(_COMPILE_JS, sources)

    def run(self, case: dict) -> dict:
        """``{"values": [...]}``, the result buffer after the case's kernels, as float32,
        or ``{"error": message}``."""
        return self.page.evaluate(_RUN_JS, case)

    def evaluate(self, js: str, arg=None):
        return self.page.evaluate(js, arg)


@contextmanager
def webgpu_page():
    """Yields a :class:`WebGPUPage`; raises RuntimeError where the browser offers no
    WebGPU."""
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            try:
                page = browser.new_page()
                page.goto(f"http://127.0.0.1:{server.server_port}/")
                info = page.evaluate(_DEVICE_JS)
                if "error" in info:
                    raise RuntimeError(f"Chromium's WebGPU: {info['error']}")
                yield WebGPUPage(page, info)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
