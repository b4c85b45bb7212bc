// SPDX-License-Identifier: GPL-3.0-or-later
//
// Selvedge cloth: bake, then render — a Flamenco 3 custom job type.
//
// Install: copy this file into the `scripts` folder next to the Flamenco Manager executable and
// restart the Manager; in Blender, Output Properties > Flamenco > refresh the job types and pick
// "Selvedge Bake + Render". (Custom job types: https://flamenco.blender.org/usage/job-types/)
//
// One job = one .blend file (the one being submitted):
//   * one bake task: Blender opens the file and runs the Selvedge command line on it
//     (cli.py: the open file is baked in this Blender, PC2 caches + JSON sidecars written to the
//     cache folder, the file saved with Mesh Cache modifiers pointing at them);
//   * render tasks in chunks of `chunk_size` frames, each depending on the bake task, rendering the
//     saved file (so from the caches) like Flamenco's own "Simple Blender Render".
//
// Workers need Blender 4.2 or later with the Selvedge extension installed (or `selvedge_cli` set to
// the path of cli.py in an extension folder the workers can read).
//
// Verified here: `node --check`, and compileJob() run under Node with stand-ins for Flamenco's
// `author`, `path`, `frameChunker` and `formatTimestampLocal` (tests/test_farm_flamenco.py). Not
// verified: a real Flamenco Manager and Worker (none is installable here).

const JOB_TYPE = {
    label: "Selvedge Bake + Render",
    description: "Bake Selvedge cloth to PC2 caches in one task, then render frame chunks from the caches.",
    settings: [
        // Settings for artists to determine:
        { key: "frames", type: "string", required: true,
          eval: "f'{C.scene.frame_start}-{C.scene.frame_end}'",
          evalInfo: { showLinkButton: true, description: "Scene frame range" },
          description: "Frames to render, e.g. '1-48' or '1-10, 20-30'. The bake covers the first to the last of them." },
        { key: "chunk_size", type: "int32", default: 10, propargs: { min: 1 }, visible: "submission",
          description: "Number of frames rendered by one render task" },
        { key: "cloth_objects", type: "string", required: false, visible: "submission",
          eval: "','.join(o.name for o in C.scene.objects if getattr(getattr(o, 'selvedge', None), 'role', '') == 'CLOTH')",
          evalInfo: { showLinkButton: true, description: "The scene's Selvedge cloth objects" },
          description: "Comma-separated cloth objects to bake (empty: every Selvedge cloth object)" },
        { key: "cache_folder", type: "string", required: true, default: "//cache/{shot}", visible: "submission",
          description: "Cache folder: '//' is relative to the .blend file, {shot} is its name" },
        { key: "substeps", type: "int32", default: 0, propargs: { min: 0 }, visible: "submission",
          description: "Solver substeps per frame (0: the scene's Selvedge setting)" },
        { key: "iterations", type: "int32", default: 0, propargs: { min: 0 }, visible: "submission",
          description: "Constraint passes per substep (0: the scene's Selvedge setting)" },
        { key: "solve_mode", type: "string", default: "scene", choices: ["scene", "auto", "serial", "colored", "jacobi"],
          visible: "submission", description: "Solve mode ('scene': the scene's Selvedge setting)" },
        { key: "threads", type: "int32", default: 0, propargs: { min: 0 }, visible: "submission",
          description: "Numba threads of the bake task (0: every core of the worker)" },
        { key: "selvedge_cli", type: "string", subtype: "file_path", default: "", visible: "submission",
          description: "cli.py of the Selvedge extension on the workers (empty: the extension installed in the workers' Blender)" },

        // render_output_root + add_path_components determine the value of render_output_path
        // (as in Flamenco's built-in "Simple Blender Render").
        { key: "render_output_root", type: "string", subtype: "dir_path", required: true, visible: "submission",
          description: "Base directory of where render output is stored. Will have some job-specific parts appended to it" },
        { key: "add_path_components", type: "int32", required: true, default: 0, propargs: { min: 0, max: 32 },
          visible: "submission",
          description: "Number of path components of the current blend file to use in the render output path" },
        { key: "render_output_path", type: "string", subtype: "file_path", editable: false,
          eval: "str(Path(abspath(settings.render_output_root), last_n_dir_parts(settings.add_path_components), jobname, '{timestamp}', '######'))",
          description: "Final file path of where render output will be saved" },

        // Automatically evaluated settings:
        { key: "blendfile", type: "string", required: true, visible: "web",
          description: "Path of the Blend file to bake and render" },
        { key: "format", type: "string", required: true, eval: "C.scene.render.image_settings.file_format",
          visible: "web" },
        { key: "image_file_extension", type: "string", required: true, eval: "C.scene.render.file_extension",
          visible: "hidden", description: "File extension used when rendering images" },
        { key: "scene", type: "string", required: true, eval: "C.scene.name", visible: "web",
          description: "Name of the scene to bake and render." },
    ]
};

// Video formats cannot be rendered in chunks.
const videoFormats = ["FFMPEG", "AVI_RAW", "AVI_JPEG"];

// Runs the installed extension's cli.py when `selvedge_cli` is empty (one line for --python-expr).
const runInstalledCli = [
    "import addon_utils, os, runpy",
    "m = next((m for m in addon_utils.modules() if m.__name__.split('.')[-1] == 'selvedge'), None)",
    "assert m is not None, 'the Selvedge extension is not installed for this Blender (set selvedge_cli)'",
    "runpy.run_path(os.path.join(os.path.dirname(m.__file__), 'cli.py'), run_name='__main__')",
].join("; ");

// Rendering must not skip frames left over from an earlier run of the job.
const pyRenderSettings = "import bpy; r = bpy.context.scene.render; r.use_file_extension = True; " +
    "r.use_overwrite = True; r.use_placeholder = False";

function compileJob(job) {
    print("Selvedge bake + render job submitted");
    const settings = job.settings;
    if (videoFormats.indexOf(settings.format) >= 0) {
        throw `This job type renders images, not "${settings.format}"`;
    }
    const bakeRange = frameRange(settings.frames);
    const renderOutput = renderOutputPath(job);
    settings.render_output_path = renderOutput;

    const bakeTask = authorBakeTask(settings, bakeRange);
    job.addTask(bakeTask);
    for (const renderTask of authorRenderTasks(settings, renderOutput)) {
        renderTask.addDependency(bakeTask);
        job.addTask(renderTask);
    }
}

// First and last frame of a Flamenco frame list such as "1-10, 20-30" or "47".
function frameRange(frames) {
    const numbers = [];
    for (const part of String(frames).split(",")) {
        const match = part.trim().match(/^(\d+)(?:\s*-\s*(\d+))?$/);
        if (!match) {
            throw `Cannot read the frame range "${frames}": use e.g. '1-48' or '1-10, 20-30'`;
        }
        numbers.push(parseInt(match[1], 10), parseInt(match[2] || match[1], 10));
    }
    const first = Math.min(...numbers);
    const last = Math.max(...numbers);
    return { first: first, last: last };
}

// Do field replacement on the render output path.
function renderOutputPath(job) {
    const template = job.settings.render_output_path;
    if (!template) {
        throw "no render_output_path setting!";
    }
    return template.replace(/{([^}]+)}/g, (match, group0) => {
        switch (group0) {
        case "timestamp":
            return formatTimestampLocal(job.created);
        default:
            return match;
        }
    });
}

function shotName(blendfile) {
    return path.basename(blendfile).replace(/\.blend$/i, "");
}

function authorBakeTask(settings, bakeRange) {
    const cacheFolder = String(settings.cache_folder).split("{shot}").join(shotName(settings.blendfile));
    let cliArgs = [
        "--frames", String(bakeRange.first), String(bakeRange.last),
        "--out", cacheFolder,
        "--save",
    ];
    const objects = String(settings.cloth_objects || "").split(",").map((s) => s.trim()).filter((s) => s);
    if (objects.length) {
        cliArgs = cliArgs.concat(["--objects"], objects);
    }
    if (settings.substeps > 0) cliArgs.push("--substeps", String(settings.substeps));
    if (settings.iterations > 0) cliArgs.push("--iterations", String(settings.iterations));
    if (settings.solve_mode && settings.solve_mode != "scene") cliArgs.push("--mode", settings.solve_mode);
    if (settings.threads > 0) cliArgs.push("--threads", String(settings.threads));

    const script = settings.selvedge_cli ? ["--python", settings.selvedge_cli] : ["--python-expr", runInstalledCli];
    let args = [];
    if (settings.scene) {
        args = args.concat(["--scene", settings.scene]);
    }
    args = args.concat(["--python-exit-code", "1"], script, ["--"], cliArgs);

    const task = author.Task(`bake-${bakeRange.first}-${bakeRange.last}`, "blender");
    task.addCommand(author.Command("blender-render", {
        exe: "{blender}",
        exeArgs: "{blenderArgs}",
        argsBefore: [],
        blendfile: settings.blendfile,
        args: args,
    }));
    return task;
}

function authorRenderTasks(settings, renderOutput) {
    const renderDir = path.dirname(renderOutput);
    let baseArgs = [];
    if (settings.scene) {
        baseArgs = baseArgs.concat(["--scene", settings.scene]);
    }
    const tasks = [];
    for (const chunk of frameChunker(settings.frames, settings.chunk_size)) {
        const task = author.Task(`render-${chunk}`, "blender");
        task.addCommand(author.Command("blender-render", {
            exe: "{blender}",
            exeArgs: "{blenderArgs}",
            argsBefore: [],
            blendfile: settings.blendfile,
            args: baseArgs.concat([
                "--python-expr", pyRenderSettings,
                "--render-output", path.join(renderDir, path.basename(renderOutput)),
                "--render-format", settings.format,
                "--render-frame", chunk.replaceAll("-", ".."), // Blender's frame range notation
            ]),
        }, chunkFrameCount(chunk)));
        tasks.push(task);
    }
    return tasks;
}

// Number of frames in a chunk such as "1-10" or "1,3,5-8".
function chunkFrameCount(chunk) {
    let count = 0;
    for (const part of chunk.split(",")) {
        const bounds = part.split("-").map((s) => parseInt(s, 10));
        count += bounds.length == 2 ? bounds[1] - bounds[0] + 1 : 1;
    }
    return count;
}
