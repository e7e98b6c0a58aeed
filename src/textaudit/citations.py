"""What to cite: the software and the papers each command implements (``audit cite``).

One table, :data:`PAPERS` (a BibTeX key and its entry), and one map, :data:`COMMANDS` (a command and
the keys of what it implements or reads). The software entry is built from the package's own version,
so it always names the release that produced a results file. ``CITATION.cff`` at the repository root
says the same for GitHub's "Cite this repository" and Zenodo.
"""

from __future__ import annotations

from textaudit.version import __version__

#: BibTeX entries, by key: the papers textaudit implements, and the data and models it ships or reads.
PAPERS: dict[str, str] = {
    "zhang2021double": """@inproceedings{zhang2021double,
  title = {Double Perturbation: On the Robustness of Robustness and Counterfactual Bias Evaluation},
  author = {Zhang, Chong and Zhao, Jieyu and Zhang, Huan and Chang, Kai-Wei and Hsieh, Cho-Jui},
  booktitle = {Proceedings of the 2021 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies (NAACL-HLT)},
  year = {2021}
}""",
    "jia2019certified": """@inproceedings{jia2019certified,
  title = {Certified Robustness to Adversarial Word Substitutions},
  author = {Jia, Robin and Raghunathan, Aditi and G{\\"o}ksel, Kerem and Liang, Percy},
  booktitle = {Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing (EMNLP-IJCNLP)},
  year = {2019}
}""",
    "ye2020safer": """@inproceedings{ye2020safer,
  title = {{SAFER}: A Structure-free Approach for Certified Robustness to Adversarial Word Substitutions},
  author = {Ye, Mao and Gong, Chengyue and Liu, Qiang},
  booktitle = {Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics (ACL)},
  pages = {3465--3475},
  year = {2020}
}""",
    "zeng2023ranmask": """@article{zeng2023ranmask,
  title = {Certified Robustness to Text Adversarial Attacks by Randomized [{MASK}]},
  author = {Zeng, Jiehang and Xu, Jianhan and Zheng, Xiaoqing and Huang, Xuanjing},
  journal = {Computational Linguistics},
  volume = {49},
  number = {2},
  year = {2023},
  doi = {10.1162/coli_a_00476}
}""",
    "cohen2019certified": """@inproceedings{cohen2019certified,
  title = {Certified Adversarial Robustness via Randomized Smoothing},
  author = {Cohen, Jeremy and Rosenfeld, Elan and Kolter, Zico},
  booktitle = {Proceedings of the 36th International Conference on Machine Learning (ICML)},
  pages = {1310--1320},
  year = {2019}
}""",
    "alzantot2018generating": """@inproceedings{alzantot2018generating,
  title = {Generating Natural Language Adversarial Examples},
  author = {Alzantot, Moustafa and Sharma, Yash and Elgohary, Ahmed and Ho, Bo-Jhang and Srivastava, Mani and Chang, Kai-Wei},
  booktitle = {Proceedings of the 2018 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year = {2018}
}""",
    "garg2020bae": """@inproceedings{garg2020bae,
  title = {{BAE}: {BERT}-based Adversarial Examples for Text Classification},
  author = {Garg, Siddhant and Ramakrishnan, Goutham},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year = {2020}
}""",
    "morris2020textattack": """@inproceedings{morris2020textattack,
  title = {{TextAttack}: A Framework for Adversarial Attacks, Data Augmentation, and Adversarial Training in {NLP}},
  author = {Morris, John and Lifland, Eli and Yoo, Jin Yong and Grigsby, Jake and Jin, Di and Qi, Yanjun},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing: System Demonstrations},
  year = {2020}
}""",
    "clouatre2021demystifying": """@article{clouatre2021demystifying,
  title = {Demystifying Neural Language Models' Insensitivity to Word-Order},
  author = {Clou{\\^a}tre, Louis and Parthasarathi, Prasanna and Zouaq, Amal and Chandar, Sarath},
  journal = {arXiv preprint arXiv:2107.13955},
  year = {2021}
}""",
    "zhang2022interpreting": """@inproceedings{zhang2022interpreting,
  title = {Interpreting the Robustness of Neural {NLP} Models to Textual Perturbations},
  author = {Zhang, Yunxiang and Pan, Liangming and Tan, Samson and Kan, Min-Yen},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2022},
  year = {2022}
}""",
    "li2023perturbscore": """@inproceedings{li2023perturbscore,
  title = {{PerturbScore}: Connecting Discrete and Continuous Perturbations in {NLP}},
  author = {Li, Linyang and Ren, Ke and Shao, Yunfan and Wang, Pengyu and Qiu, Xipeng},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2023},
  year = {2023}
}""",
    "mrksic2016counter": """@inproceedings{mrksic2016counter,
  title = {Counter-fitting Word Vectors to Linguistic Constraints},
  author = {Mrk{\\v{s}}i{\\'c}, Nikola and {\\'O} S{\\'e}aghdha, Diarmuid and Thomson, Blaise and Ga{\\v{s}}i{\\'c}, Milica and Rojas-Barahona, Lina and Su, Pei-Hao and Vandyke, David and Wen, Tsung-Hsien and Young, Steve},
  booktitle = {Proceedings of the 2016 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies (NAACL-HLT)},
  year = {2016}
}""",
    "zhao2018gender": """@inproceedings{zhao2018gender,
  title = {Gender Bias in Coreference Resolution: Evaluation and Debiasing Methods},
  author = {Zhao, Jieyu and Wang, Tianlu and Yatskar, Mark and Ordonez, Vicente and Chang, Kai-Wei},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies (NAACL-HLT)},
  year = {2018}
}""",
    "ribeiro2020beyond": """@inproceedings{ribeiro2020beyond,
  title = {Beyond Accuracy: Behavioral Testing of {NLP} Models with {CheckList}},
  author = {Ribeiro, Marco Tulio and Wu, Tongshuang and Guestrin, Carlos and Singh, Sameer},
  booktitle = {Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics (ACL)},
  year = {2020}
}""",
    "socher2013recursive": """@inproceedings{socher2013recursive,
  title = {Recursive Deep Models for Semantic Compositionality Over a Sentiment Treebank},
  author = {Socher, Richard and Perelygin, Alex and Wu, Jean and Chuang, Jason and Manning, Christopher D. and Ng, Andrew and Potts, Christopher},
  booktitle = {Proceedings of the 2013 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year = {2013}
}""",
    "wang2020minilm": """@inproceedings{wang2020minilm,
  title = {{MiniLM}: Deep Self-Attention Distillation for Task-Agnostic Compression of Pre-Trained Transformers},
  author = {Wang, Wenhui and Wei, Furu and Dong, Li and Bao, Hangbo and Yang, Nan and Zhou, Ming},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year = {2020}
}""",
    "hu2022lora": """@inproceedings{hu2022lora,
  title = {{LoRA}: Low-Rank Adaptation of Large Language Models},
  author = {Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year = {2022}
}""",
    "zheng2016stability": """@inproceedings{zheng2016stability,
  title = {Improving the Robustness of Deep Neural Networks via Stability Training},
  author = {Zheng, Stephan and Song, Yang and Leung, Thomas and Goodfellow, Ian},
  booktitle = {Proceedings of the IEEE Conference on Computer Vision and Pattern Recognition (CVPR)},
  year = {2016}
}""",
    "garg2019counterfactual": """@inproceedings{garg2019counterfactual,
  title = {Counterfactual Fairness in Text Classification through Robustness},
  author = {Garg, Sahaj and Perot, Vincent and Limtiaco, Nicole and Taly, Ankur and Chi, Ed H. and Beutel, Alex},
  booktitle = {Proceedings of the 2019 AAAI/ACM Conference on AI, Ethics, and Society (AIES)},
  year = {2019}
}""",
    "newcombe1998paired": """@article{newcombe1998paired,
  title = {Improved Confidence Intervals for the Difference between Binomial Proportions Based on Paired Data},
  author = {Newcombe, Robert G.},
  journal = {Statistics in Medicine},
  volume = {17},
  number = {22},
  pages = {2635--2650},
  year = {1998}
}""",
    "schuirmann1987tost": """@article{schuirmann1987tost,
  title = {A Comparison of the Two One-Sided Tests Procedure and the Power Approach for Assessing the Equivalence of Average Bioavailability},
  author = {Schuirmann, Donald J.},
  journal = {Journal of Pharmacokinetics and Biopharmaceutics},
  volume = {15},
  number = {6},
  pages = {657--680},
  year = {1987}
}""",
    "chen2021codex": """@article{chen2021codex,
  title = {Evaluating Large Language Models Trained on Code},
  author = {Chen, Mark and Tworek, Jerry and Jun, Heewoo and Yuan, Qiming and others},
  journal = {arXiv preprint arXiv:2107.03374},
  year = {2021}
}""",
    "guo2017calibration": """@inproceedings{guo2017calibration,
  title = {On Calibration of Modern Neural Networks},
  author = {Guo, Chuan and Pleiss, Geoff and Sun, Yu and Weinberger, Kilian Q.},
  booktitle = {Proceedings of the 34th International Conference on Machine Learning (ICML)},
  year = {2017}
}""",
    "brier1950verification": """@article{brier1950verification,
  title = {Verification of Forecasts Expressed in Terms of Probability},
  author = {Brier, Glenn W.},
  journal = {Monthly Weather Review},
  volume = {78},
  number = {1},
  pages = {1--3},
  year = {1950}
}""",
    "speer2022wordfreq": """@software{speer2022wordfreq,
  title = {wordfreq},
  author = {Speer, Robyn},
  version = {3.0},
  year = {2022}
}""",
}

_NEIGHBOURHOODS = ["zhang2021double", "wang2020minilm"]
#: the statistics of paired decisions: non-inferiority and equivalence at a margin (--margin)
_DECISIONS = ["newcombe1998paired", "schuirmann1987tost"]
_SST2 = ["socher2013recursive"]

#: Each command and what it implements or reads (after the software itself, which every command cites).
COMMANDS: dict[str, list[str]] = {
    "attack": [*_NEIGHBOURHOODS, "mrksic2016counter", "alzantot2018generating", "jia2019certified",
               "garg2020bae", "morris2020textattack", "chen2021codex", *_SST2],
    "compare": [*_NEIGHBOURHOODS, "mrksic2016counter", "alzantot2018generating", "jia2019certified",
                "garg2020bae", *_DECISIONS, *_SST2],
    "neighbors": _NEIGHBOURHOODS,
    "replay": [*_DECISIONS, "chen2021codex", "zhang2021double"],
    "bias": [*_NEIGHBOURHOODS, "zhao2018gender", "ribeiro2020beyond", "speer2022wordfreq", *_SST2],
    "certify": ["jia2019certified", "ye2020safer", "zeng2023ranmask", "cohen2019certified", "mrksic2016counter", *_NEIGHBOURHOODS, *_SST2],
    "train": ["jia2019certified", "zhang2021double", *_SST2],
    "train-mlm": ["wang2020minilm", "hu2022lora", "zhang2021double"],
    "wordorder": ["clouatre2021demystifying", *_SST2],
    "learnability": ["zhang2022interpreting", *_SST2],
    "perturbscore": ["li2023perturbscore", *_SST2],
    "evaluate": ["guo2017calibration", "brier1950verification", *_SST2],
    "run": [*_DECISIONS, *_NEIGHBOURHOODS],
    # mining = the second-order attacks; adversarial training as TextAttack's; the consistency loss is
    # stability training's (on natural neighbours) and, on protected pairs, counterfactual logit pairing
    "harden": [*_NEIGHBOURHOODS, "morris2020textattack", "zheng2016stability", "garg2019counterfactual",
               "hu2022lora", *_SST2],
}


def software_bibtex() -> str:
    """The BibTeX entry of this release of textaudit."""
    return f"""@software{{textaudit,
  title = {{textaudit: auditing NLP text classifiers beyond their test set}},
  author = {{{{textaudit developers}}}},
  version = {{{__version__}}},
  year = {{2026}},
  license = {{MIT}}
}}"""


def keys_for(command: str | None) -> list[str]:
    """The paper keys ``command`` cites (every paper when None), in the order of :data:`COMMANDS`."""
    if command is None:
        return list(PAPERS)
    return list(dict.fromkeys(COMMANDS.get(command, [])))


def bibtex(command: str | None = None) -> str:
    """The software's entry and the papers of ``command`` (all of them when None), as one BibTeX file."""
    return "\n\n".join([software_bibtex(), *(PAPERS[k] for k in keys_for(command))]) + "\n"
