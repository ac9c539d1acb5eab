"""Capture tools run on a GPU: python3 -m flashsim.gpu.capture.NAME --out DIR"""
