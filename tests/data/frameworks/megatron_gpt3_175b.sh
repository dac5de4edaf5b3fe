#!/bin/bash
# GPT-3 175B on 1024 GPUs (Narayanan et al. 2021 layout: TP 8, PP 8, interleaved), Megatron-LM flags

export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=8
NUM_NODES=128

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port 6000
)

GPT_MODEL_ARGS=(
    --num-layers 96
    --hidden-size 12288
    --num-attention-heads 96
    --seq-length 2048
    --max-position-embeddings 2048
    --attention-backend auto # flash, fused, unfused or local
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1536
    --train-iters 500000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --init-method-std 0.006
    --clip-grad 1.0
    --bf16
    --lr 6.0e-5
    --lr-decay-style cosine
    --min-lr 6.0e-6
    --lr-warmup-fraction .001
    --lr-decay-iters 430000
    --use-distributed-optimizer
    --overlap-grad-reduce
    --recompute-activations
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 8
	--pipeline-model-parallel-size 8
	--num-layers-per-virtual-pipeline-stage 3
	--sequence-parallel
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --vocab-file $VOCAB_FILE
    --merge-file $MERGE_FILE
    --split 949,50,1
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    --log-interval 100 --save-interval 10000 --eval-interval 1000 --eval-iters 10
