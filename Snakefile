# graphsweep: eager baseline vs CUDA Graph variants for every cell of a sweep.
# The sweep spec is config["spec"] (configs/sweep.yaml by default):
#   snakemake --cores 2
#   snakemake --cores 2 --config spec=configs/examples/h200-builtin.yaml
import mimetypes

from snakemake.utils import min_version

# so `snakemake --report` labels the Parquet outputs correctly
mimetypes.add_type("application/vnd.apache.parquet", ".parquet")

min_version("9.0")


configfile: "configs/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/controller.smk"
include: "rules/plan.smk"
include: "rules/run.smk"
include: "rules/ingest.smk"
include: "rules/parse.smk"
include: "rules/decide.smk"
include: "rules/report.smk"
include: "rules/archive.smk"


rule all:
    default_target: True
    input:
        get_final_outputs,
