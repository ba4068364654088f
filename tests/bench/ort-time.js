#!/usr/bin/env node
// ort-time.js: time one ONNX model through ONNX Runtime (CPU), for bench_models.
//
//   ORT_NODE_MODULES=/path/to/node_modules \
//     node tests/bench/ort-time.js MODEL THREADS RUNS IN_NAME IN_FILE IN_DIMS OUT_NAME OUT_FILE
//
// IN_FILE holds the input as raw little-endian float32, IN_DIMS its shape ("1,64,56,56").
// The output OUT_NAME of the last run is written to OUT_FILE as raw float32. Prints two lines:
//   ort <version> threads <T> runs <N> median_ms <m> p90_ms <p>
//   times <ms of run 1> <ms of run 2> ...
// ONNX Runtime is not a dependency of npud: it comes from npm, installed outside the
// repository (`npm install --ignore-scripts onnxruntime-node`), and ORT_NODE_MODULES names
// the node_modules folder that holds it.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(msg) {
        process.stderr.write(`ort-time: ${msg}\n`);
        process.exit(2);
}

const argv = process.argv.slice(2);
if (argv.length !== 8)
        fail('usage: ort-time.js MODEL THREADS RUNS IN_NAME IN_FILE IN_DIMS OUT_NAME OUT_FILE');
const [model, threadsArg, runsArg, inName, inFile, inDims, outName, outFile] = argv;
const threads = parseInt(threadsArg, 10);
const runs = parseInt(runsArg, 10);
if (!(threads >= 1) || !(runs >= 1))
        fail(`bad THREADS '${threadsArg}' or RUNS '${runsArg}'`);
const mods = process.env.ORT_NODE_MODULES;
if (!mods)
        fail('ORT_NODE_MODULES is not set');

let ort;
try {
        ort = require(path.join(path.resolve(mods), 'onnxruntime-node'));
} catch (e) {
        fail(`cannot load onnxruntime-node from ${mods}: ${e.message}`);
}

function quantile(sorted, q) {
        return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
        const dims = inDims.split(',').map((d) => parseInt(d, 10));
        const raw = fs.readFileSync(inFile);
        // A copy: the Buffer's offset into its pool need not be 4-byte aligned.
        const x = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
        if (x.length !== dims.reduce((a, b) => a * b, 1))
                fail(`${inFile} holds ${x.length} floats, shape ${inDims} needs another count`);
        // One pool of THREADS threads for the operators, nodes one after another (no
        // inter-op pool); otherwise ONNX Runtime's defaults, as a user would run it.
        const session = await ort.InferenceSession.create(model, {
                executionProviders: ['cpu'],
                intraOpNumThreads: threads,
                interOpNumThreads: 1,
                executionMode: 'sequential',
                graphOptimizationLevel: 'all',
        });
        const feeds = { [inName]: new ort.Tensor('float32', x, dims) };
        let out;
        for (let i = 0; i < 3; i++) // warm-up, as bench_models does for npud
                out = await session.run(feeds);
        const times = [];
        for (let i = 0; i < runs; i++) {
                const t0 = process.hrtime.bigint();
                out = await session.run(feeds);
                times.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
        const y = out[outName];
        if (!y)
                fail(`the model has no output '${outName}'`);
        fs.writeFileSync(outFile, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
        const sorted = times.slice().sort((a, b) => a - b);
        const version = (ort.env && ort.env.versions && ort.env.versions.common) || 'unknown';
        console.log(`ort ${version} threads ${threads} runs ${runs} ` +
                    `median_ms ${quantile(sorted, 0.5).toFixed(4)} p90_ms ${quantile(sorted, 0.9).toFixed(4)}`);
        console.log(`times ${times.map((t) => t.toFixed(4)).join(' ')}`);
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
