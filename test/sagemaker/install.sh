#!/usr/bin/env bash
# Makes a Python venv with the SageMaker Python SDK v3 (sagemaker-train >=1.20,<2) for the
# tests that run ordinary SDK code against a real server (cmd/quotashare's TestSageMakerSDK,
# which calls this script itself when its venv is missing):
#
#   test/sagemaker/install.sh VENV_DIR
#
# From the package index where it is reachable; otherwise, as on this project's machines,
# from sources.tar.gz beside this script (sagemaker-train 1.20.0 and sagemaker-core 2.20.0 at
# aws/sagemaker-python-sdk a24812666d25, Apache-2.0; graphene and graphql-relay, MIT; each
# with its LICENSE inside), with the SDK's import-time dependencies from Debian's python3-*
# packages (apt-get, as root) and boto3/botocore/pydantic/PyYAML/jinja2/requests from the
# site-packages of the machine's python3 (--system-site-packages; boto3 must be new enough
# to know SubmitServiceJob, 1.40 or later).
set -eu
venv=${1:?usage: install.sh VENV_DIR}
here=$(cd "$(dirname "$0")" && pwd)
py=$(command -v python3)
check='import sagemaker.train.aws_batch.training_queue, sagemaker.train.model_trainer
import importlib.metadata as m; print("sagemaker-train", m.version("sagemaker-train"), "sagemaker-core", m.version("sagemaker-core"), "boto3", m.version("boto3"))'

rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
if "$venv/bin/pip" install -q --timeout 10 --retries 0 "sagemaker-train>=1.20,<2" >/dev/null 2>&1; then
  "$venv/bin/python" -c "$check"
  exit 0
fi
echo "install.sh: the package index is out of reach; installing the SDK from $here/sources.tar.gz" >&2

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar -xzf "$here/sources.tar.gz" -C "$tmp"
# Modules sagemaker.core's __init__ imports that the system Python lacks (omegaconf needs antlr4 4.9).
debs="python3-wheel python3-importlib-metadata python3-zipp python3-more-itertools python3-rich python3-markdown-it python3-mdurl
python3-platformdirs python3-aniso8601 python3-nest-asyncio python3-tblib python3-numpy python3-pandas
python3-tz python3-omegaconf python3-antlr4 python3-packaging"
need=
for p in $debs; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
sp=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for p in $debs; do
  for f in $(dpkg -L "$p" | grep '^/usr/lib/python3/dist-packages/[^/]*$'); do cp -a "$f" "$sp/"; done
done
# graphql-relay's pyproject.toml names poetry as its build backend; its setup.py does the same job.
"$venv/bin/pip" install -q --no-deps --no-build-isolation --no-index \
  "$tmp/graphql-relay" "$tmp/graphene" \
  "$tmp/sagemaker-python-sdk/sagemaker-core" "$tmp/sagemaker-python-sdk/sagemaker-train"
"$venv/bin/python" -c "$check"
