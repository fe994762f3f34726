"""The names in the features contract (models/features.py has the contract itself) and the
token id of padding (trainer/data/tokenizer.py has the vocabulary)."""

IMAGE = 'image'
TOKEN_IDS = 'token_ids'
LENGTH = 'length'
MASK = 'mask'
IMAGE_DTYPES = ('uint8', 'float32', 'bfloat16')
PAD_ID = 0  # token ids: 0 pads a text to max_seq_length
UNK_ID = 1  # token ids: 1 is any word outside the vocabulary
