"""The embedded pipelines: what ``streamcov run`` runs with no pipeline file (no download).

``pipelines/synthetic.toml`` and ``pipelines/textures_demo.toml`` hold the
same texts (a test keeps them equal).
"""

# The embedded default: the built-in generator, eq. (3) map, incremental SGD.
DEFAULT_PIPELINE = """\
# The embedded default of `streamcov run` (no arguments): the built-in skeleton
# generator (data/synthetic_skeletons.md), eq. (3) random features, incremental SGD.
task = "skeleton-classification"
name = "synthetic_default"
seed = 0
output = "runs/{name}"

[data.synthetic]
n_sequences = 600
n_subjects = 10
n_classes = 10
seed = 0

[descriptor]
gamma = 1e-4
normalize = true

[features]
map = "rgw"
n_components = 2000
sigma = 1.0
theta = 0.7
sampling = "stratified"
center = true

[model]
learner = "sgd"
loss = "hinge"
learning_rate = "pa1"
eta0 = 1.0
penalty = "none"
average = false
scale = "center"
epochs = 60

[split]
kind = "subject-parity"
"""

# ``streamcov run --demo images``: scikit-image's bundled textures, no download.
DEFAULT_IMAGE_PIPELINE = """\
# Embedded demo, no download: scikit-image's bundled brick, grass and gravel
# textures cut into 64 x 64 patches (64 per class), per-pixel features
# [x, y, I, |Ix|, |Iy|] (paper 004's Texture set-up), Approx LogHS + Gaussian SVM.
task = "image-classification"
name = "textures_demo"
seed = 0

[data]
format = "skimage-textures"
textures = ["brick", "grass", "gravel"]
patch = 64

[pixels]
preset = "texture"

[method]
name = "approx_loghs"
classifier = "svc"
D = 50
sigma1 = [1.0]
gamma = [1e-3]
sigma2 = [0.5, 1.0]
C = [10.0]
inner_folds = 3
scaling = "per-feature"   # x, y (pixel units) would swamp I, |Ix|, |Iy| under one global scale

[split]
kind = "per-class"
n_train = 20
n_repeats = 3
"""

DEMOS = {"skeletons": DEFAULT_PIPELINE, "images": DEFAULT_IMAGE_PIPELINE}
# how errors name a demo's line (`--set` changes it): its text is not a file the user has, and was named
# "<pipeline text>"; the shipped copy has the same lines
DEMO_NAMES = {"skeletons": "the embedded default pipeline (pipelines/synthetic.toml)",
              "images": "the pipeline of --demo images (pipelines/textures_demo.toml)"}
